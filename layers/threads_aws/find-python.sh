#!/bin/sh
# Print the path of a working python<VERSION> (e.g. 3.13): from PATH, else pyenv's newest
# <VERSION>.x. Prints nothing and exits 1 when there is none. A pyenv shim on PATH that points
# at another version fails to run, so every candidate is run before it is chosen.
v="$1"
ok() { [ -x "$1" ] && "$1" -c 'import sys; sys.exit(0 if "%d.%d" % sys.version_info[:2] == "'"$v"'" else 1)' 2>/dev/null; }
c=$(command -v "python$v" 2>/dev/null) && ok "$c" && { echo "$c"; exit 0; }
root="${PYENV_ROOT:-$HOME/.pyenv}"
for c in $(ls -d "$root"/versions/"$v".*/bin/python"$v" 2>/dev/null | sort -V -r); do
  ok "$c" && { echo "$c"; exit 0; }
done
exit 1
