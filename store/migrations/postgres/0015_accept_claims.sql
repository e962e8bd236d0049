-- An accept claims its proposal before it makes anything (docs/delivery.md): the state moves
-- pending → accepting by compare-and-set, with who holds the claim, since when, and what the
-- accept will make (JSON: the repository, the ref, the remote), so a claim whose holder is gone
-- can be rolled back by the next accept or reject. Cleared when the claim ends.
ALTER TABLE proposals ADD COLUMN claimed_by TEXT;
ALTER TABLE proposals ADD COLUMN claimed_at TEXT;
ALTER TABLE proposals ADD COLUMN claim_json TEXT;
