#!/usr/bin/python3
"""tools/readme_check.py's reading of the repository: an OPTIREDUCE_* variable read by C, C++,
Python or shell code is reported unless it is a setting or an OPTIREDUCE_UCX_* one, with the file
and line of the read; writes, other prefixes and names in prose are not reads."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import readme_check  # noqa: E402

# "@" stands for OPTIREDUCE_ (written out, these reads would be this file's own).
FILES = {
    "src/a.cpp": 'int x = 1;\nconst char* v = std::getenv("@HARNESS_LOG");\n'
                 'const char* m = std::getenv("@MODE");\n',
    "tests/b.c": 'const char *u = getenv("@UCX_TLS");\nconst char *t = getenv("MPITEST_ERRORS");\n',
    "tools/c.py": 'import os\nenv = dict(os.environ, @WRITTEN="1")\n'
                  'x = os.environ.get("@PY_ONLY")\ny = os.environ["@MODE"]\n',
    "scripts/d.sh": '# @IN_A_COMMENT is prose\necho "${@LOG:-warn}"\n[ -n "$@SH_ONLY" ]\n',
    "docs/e.md": 'getenv("@IN_DOCS")\n',
}


def main():
    with tempfile.TemporaryDirectory() as root:
        for name, text in FILES.items():
            os.makedirs(os.path.join(root, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(root, name), "w") as f:
                f.write(text.replace("@", "OPTIREDUCE_"))
        found = readme_check.foreign_variables(root, {"OPTIREDUCE_MODE", "OPTIREDUCE_LOG"})
    where = sorted(line.split(" which ")[0] for line in found)
    expected = ["scripts/d.sh:3 reads OPTIREDUCE_SH_ONLY,", "src/a.cpp:2 reads OPTIREDUCE_HARNESS_LOG,",
                "tools/c.py:3 reads OPTIREDUCE_PY_ONLY,"]
    if where != expected:
        print(f"readme_check_reads: reported {where}, expected {expected}", file=sys.stderr)
        return 1
    print(f"readme_check_reads: ok ({len(found)} reads reported)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
