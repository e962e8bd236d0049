"""Verifies a Roundtable provenance envelope with an independent DSSE implementation
(securesystemslib, from PyPI). Usage: verify_dsse.py ENVELOPE.json PUBLIC_KEY.json
Exit 0 and "verified" when the signature holds; exit 1 otherwise."""
import json
import sys

from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as file:
        envelope = Envelope.from_dict(json.load(file))
    with open(sys.argv[2], encoding="utf-8") as file:
        public = json.load(file)
    key = SSlibKey(public["keyid"], public["keytype"], public["scheme"], public["keyval"])
    try:
        envelope.verify([key], 1)
    except Exception as error:  # securesystemslib raises VerificationError (and others on bad input)
        print(f"not verified: {error}")
        return 1
    statement = json.loads(envelope.payload)
    print("verified", statement["predicateType"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
