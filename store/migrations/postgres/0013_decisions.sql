-- An operator's accept or reject of a proposal (docs/delivery.md): the decision as JSON (who,
-- when, the branch and commit, the overrides with their reasons, what the gates found) and an
-- accepted proposal's signed provenance (a DSSE envelope, JSON). Only a pending proposal is
-- decided; its state moves to accepted or rejected in the same statement.
ALTER TABLE proposals ADD COLUMN decision_json TEXT;
ALTER TABLE proposals ADD COLUMN provenance TEXT;
