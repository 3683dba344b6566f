"""Execute one notebook with nbclient (its folder as the working directory); exit 1 with
the failing cell's error when any cell errors. Used by test_notebooks.py in a subprocess so
that notebook 03 can run inside a fresh network namespace."""
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def main(path: str, timeout: int = 600) -> int:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(Path(path).parent)}})
    try:
        client.execute()
    except CellExecutionError as exc:
        print(str(exc)[-4000:], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
