"""Verifies a Roundtable provenance envelope with an independent DSSE implementation
(securesystemslib, from PyPI), following docs/provenance.md as a third-party verifier would.
Usage: verify_dsse.py ENVELOPE.json PUBLIC_KEY.json [COMMIT]
The key's id must be the SHA-256 of its raw bytes; with COMMIT, the statement's one commit subject
must be it. Exit 0 and "verified" when all of that holds; exit 1 otherwise."""
import hashlib
import json
import sys

from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

PREDICATE_TYPE = "https://roundtable.dev/provenance/v1"


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as file:
        envelope = Envelope.from_dict(json.load(file))
    with open(sys.argv[2], encoding="utf-8") as file:
        public = json.load(file)
    computed = hashlib.sha256(bytes.fromhex(public["keyval"]["public"])).hexdigest()
    if public["keyid"] != computed:
        print(f"not verified: the key file states keyid {public['keyid']} but the key's SHA-256 is {computed}")
        return 1
    key = SSlibKey(computed, public["keytype"], public["scheme"], public["keyval"])
    try:
        envelope.verify([key], 1)
    except Exception as error:  # securesystemslib raises VerificationError (and others on bad input)
        print(f"not verified: {error}")
        return 1
    statement = json.loads(envelope.payload)
    if statement.get("predicateType") != PREDICATE_TYPE:
        print(f"not verified: predicateType {statement.get('predicateType')!r}")
        return 1
    if len(sys.argv) > 3:
        commits = [s["digest"]["gitCommit"] for s in statement["subject"] if "gitCommit" in s.get("digest", {})]
        if commits != [sys.argv[3]]:
            print(f"not verified: the statement is about {commits}, not {sys.argv[3]}")
            return 1
    print("verified", statement["predicateType"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
