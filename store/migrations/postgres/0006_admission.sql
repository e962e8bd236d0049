-- What admission probes read inside an image, cached by image ID and contract hash: an image ID
-- names immutable content and the contract names the commands, so a second probe would read the
-- same bytes.
CREATE TABLE probes (
    image_id       TEXT NOT NULL,
    contract_hash  TEXT NOT NULL,
    runs           TEXT NOT NULL,
    probed_at      TEXT NOT NULL,
    PRIMARY KEY (image_id, contract_hash)
);

-- Canary attestations: whether a canary run of an adapter passed in an image, until expires_at.
CREATE TABLE canaries (
    adapter     TEXT NOT NULL,
    image_id    TEXT NOT NULL,
    verdict     TEXT NOT NULL,
    detail      TEXT NOT NULL,
    at          TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    PRIMARY KEY (adapter, image_id)
);
