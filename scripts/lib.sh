# Shared helpers for strobe's scripts (sourced, not run).

# Installs Debian packages that are missing; needs root (or sudo) the first time only.
need_apt() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "installing: ${missing[*]}" >&2
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Installs a Python package for the python3 on PATH when its module cannot be imported:
# need_pip MODULE PACKAGE. Debian's python3 is "externally managed", hence the flag.
need_pip() {
    python3 -c "import $1" 2>/dev/null && return 0
    python3 -m pip --version >/dev/null 2>&1 || need_apt python3-pip
    echo "installing (pip): $2" >&2
    python3 -m pip install --quiet --break-system-packages "$2" 2>/dev/null \
        || python3 -m pip install --quiet "$2"
}

