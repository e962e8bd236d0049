-- What a proposal could not carry: entries the extractor refused and writes to files the agent
-- was not given, each with its reason (JSON list). NULL for proposals recorded before.
ALTER TABLE proposals ADD COLUMN rejected_json TEXT;
