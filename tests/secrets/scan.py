"""Yelp's detect-secrets with its default plugins over every file of a directory.

    python scan.py DIR    prints {"<file name>": ["<secret type>", ...], ...} as JSON

Driven by tests/secrets_corpus.rs, which writes each corpus value as `key: "value"` into its
own file of DIR. The default settings are detect-secrets' own (every plugin of its registry
with its default limits, and its default filters), as `detect-secrets scan` applies them.
"""

import json
import os
import sys

from detect_secrets import SecretsCollection
from detect_secrets.settings import default_settings


def main(root: str) -> None:
    found = {}
    with default_settings():
        collection = SecretsCollection(root=root)
        for name in sorted(os.listdir(root)):
            collection.scan_file(name)
        for filename, secret in collection:
            found.setdefault(os.path.basename(filename), []).append(secret.type)
    json.dump({k: sorted(set(v)) for k, v in found.items()}, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
