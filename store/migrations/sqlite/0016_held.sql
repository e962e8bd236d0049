-- Why an object is held: declared more than once in the spec directory, its record keeps its last
-- valid spec and nothing runs for it until only one declaration is left (docs/cli.md). NULL when
-- it is not held. Written by the scan's sync; read with the record by every reconcile.
ALTER TABLE objects ADD COLUMN held TEXT;
