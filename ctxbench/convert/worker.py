"""Child process of ``ctxbench.convert.pdf``: ``python -m ctxbench.convert.worker CONVERTER PATH`` prints one JSON
object, ``{"markdown", "pages"}`` or ``{"error": reason, "detail"}``; the parent bounds it with a timeout."""

import json
import sys

from ctxbench.convert.pdf import convert_in_child

if __name__ == "__main__":
    sys.stdout.write(json.dumps(convert_in_child(sys.argv[1], sys.argv[2]), ensure_ascii=False))
