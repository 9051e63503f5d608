#!/usr/bin/env bash
# Checks strobe's Debian package on this machine, as root:
#   1. builds it (scripts/package.sh --debug: the debug build the tests already made; or
#      STROBE_DEB=path/to/strobe_*.deb to check a given package) and reads its control data;
#   2. installs it with dpkg on this machine and checks what a user gets: `strobe --version`,
#      a man page for every command `strobe --help` lists (`man strobe-gen` rendered by
#      man-db), bash completion loaded from its file (`complete -p strobe`, and completing
#      `strobe ge` and `strobe lab `), the zsh and fish scripts, the token postinst made;
#   3. the installed units: `systemd-analyze verify`, strobe-agent.service byte for byte
#      deploy/'s, strobe.service the same user, state, capabilities and hardening as it and
#      listening on loopback by default;
#   4. a short run as the unit's user (a fresh system user: the unit's is a dynamic one)
#      with exactly the unit's capabilities, no new privileges and its locked-memory limit, on
#      a veth pair in a network namespace of its own: `strobe gen` over AF_PACKET and AF_XDP
#      with exact counts, then `strobe serve` started by the installed unit's own ExecStart
#      and Environment= lines with the token postinst made as its credential: loopback only,
#      401 without the token, an OTG config and start with exact counts, exit 0 on SIGTERM;
#   5. `dpkg --purge strobe` leaves none of its files, nor the token.
# dpkg -i on this machine rather than in a container: the checks need man-db, bash and
# systemd-analyze, which are here already, and take seconds; a container would add a base
# image with them and still not run the unit (systemd is not PID 1 here; tests/deploy boots
# one for the agent unit, whose capability and hardening lines this unit shares, checked in 3).
# Refuses to run when a package named strobe is installed already (it would replace it).
# Everything it makes (the package's installation, namespace, user, processes, files) is
# removed on exit, also on failure.
#
#   bash tests/package/run.sh           STROBE_DEB=path/to/strobe_*.deb to check another package
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TAG=pkg$$ SUITE=package
INSTALLED=0
# shellcheck source=../lib/unit_host.sh
. "$ROOT/tests/lib/unit_host.sh"
extra_cleanup() {
    if [ "$INSTALLED" = 1 ]; then
        dpkg --purge strobe >/dev/null 2>&1 || echo "cleanup: dpkg --purge strobe failed: remove it by hand"
    fi
}

if [ "$(id -u)" != 0 ]; then
    fail "needs root (dpkg -i, namespaces, a test user, setpriv)"
    exit 1
fi
# man-db renders the pages; bash is the completion's shell.
(cd "$ROOT" && . scripts/lib.sh && need_apt man-db) || { fail "apt-get install man-db"; exit 1; }
for tool in dpkg dpkg-deb man ip setpriv prlimit useradd python3 systemd-analyze; do
    command -v "$tool" >/dev/null || { fail "$tool is missing (dpkg, man-db, iproute2, util-linux, passwd, python3, systemd)"; exit 1; }
done
if dpkg-query -W -f='${Status}' strobe 2>/dev/null | grep -q "ok installed"; then
    fail "a package named strobe is installed on this machine: this test would replace and purge it (dpkg --purge strobe first)"
    exit 1
fi

WORK=$(mktemp -d "/tmp/$TAG.XXXXXX")
chmod 755 "$WORK"

# --- 1. the package -------------------------------------------------------------------------
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)
DEB=${STROBE_DEB:-}
if [ -z "$DEB" ]; then
    t0=$(date +%s)
    if (cd "$ROOT" && bash scripts/package.sh --debug) > "$WORK/package.log" 2>&1; then
        DEB=$(grep '\.deb$' "$WORK/package.log" | tail -1)
        pass "scripts/package.sh --debug: $(basename "$DEB") in $(($(date +%s) - t0)) s ($(du -h "$DEB" | cut -f1))"
    else
        fail "scripts/package.sh --debug: $(tail -15 "$WORK/package.log")"
        exit 1
    fi
fi
[ -f "$DEB" ] || { fail "no package at '$DEB'"; exit 1; }
field() { dpkg-deb -f "$DEB" "$1"; }
if [ "$(field Package)" = strobe ] && [ "$(field Version)" = "$VERSION-1" ]; then
    pass "control: Package strobe, Version $VERSION-1, Depends $(field Depends)"
else fail "control: $(dpkg-deb -f "$DEB")"; fi

# --- 2. installed: the binary, man pages, completions ---------------------------------------
if out=$(dpkg -i "$DEB" 2>&1); then
    INSTALLED=1
    pass "dpkg -i $(basename "$DEB")"
else
    INSTALLED=1  # half-installed: purged on exit all the same
    fail "dpkg -i: $out"
    exit 1
fi
mapfile -t FILES < <(dpkg -L strobe)

if [ "$(command -v strobe)" = /usr/bin/strobe ] && [ "$(strobe --version)" = "strobe $VERSION" ]; then
    pass "strobe --version: $(strobe --version) (/usr/bin/strobe)"
else fail "strobe --version: $(command -v strobe): $(strobe --version 2>&1)"; fi

# The commands as the binary's own help lists them, and one level below.
commands() {  # commands ARGS...: the subcommands that `strobe ARGS --help` lists
    strobe "$@" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }' | grep -vx help
}
missing=() pages=0
for c in $(commands); do
    for name in "strobe-$c" $(commands "$c" | sed "s/^/strobe-$c-/"); do
        pages=$((pages + 1))
        man -w "$name" >/dev/null 2>&1 || missing+=("$name")
    done
done
if [ "$pages" -gt 10 ] && [ ${#missing[@]} = 0 ] && man -w strobe >/dev/null 2>&1; then
    pass "a man page for strobe and each of its $pages commands and subcommands (man -w)"
else fail "man pages missing: ${missing[*]:-(no commands found in strobe --help)}"; fi
page=$(MANWIDTH=100 MANPAGER=cat man strobe-gen 2>&1)
if echo "$page" | grep -q "^ *strobe-gen - Generate traffic" && echo "$page" | grep -q -- "--rate" &&
    echo "$page" | grep -q "strobe $VERSION"; then
    pass "man strobe-gen renders: $(echo "$page" | grep -m1 "strobe-gen - " | sed 's/^ *//')"
else fail "man strobe-gen: $(echo "$page" | head -12)"; fi

BASH_COMPLETION=/usr/share/bash-completion/completions/strobe
# Completion as bash runs it at a prompt: the function named by `complete -p`, with the words
# typed so far.
complete_words() {  # complete_words WORD...: what bash offers for the last word
    bash --norc --noprofile -c '
        source "$1" && shift
        spec=$(complete -p strobe) || exit 1
        fn=$(echo "$spec" | sed -n "s/.*-F \([^ ]*\) .*/\1/p")
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
        "$fn" strobe "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
        printf "%s\n" "${COMPREPLY[@]}"' bash "$BASH_COMPLETION" "$@" 2>&1
}
spec=$(bash --norc --noprofile -c 'source "$1" && complete -p strobe' bash "$BASH_COMPLETION" 2>&1)
first=$(complete_words strobe ge | sort | paste -sd' ' -)
lab=$(complete_words strobe lab "" | grep -v '^-' | sort | paste -sd' ' -)
lab_help=$(commands lab | sort | paste -sd' ' -)
if echo "$spec" | grep -q -- "-F _strobe.* strobe$" && [ "$first" = gen ] && [ -n "$lab" ] && [ "$lab" = "$lab_help" ]; then
    pass "bash completion: '$spec'; 'strobe ge' -> $first, 'strobe lab ' -> $lab"
else fail "bash completion: spec '$spec', 'strobe ge' -> '$first', 'strobe lab ' -> '$lab' (strobe lab --help: $lab_help)"; fi
if complete_words strobe gen | grep -q generate-docs; then
    fail "bash completion offers the hidden generate-docs"
fi
ZSH=/usr/share/zsh/vendor-completions/_strobe FISH=/usr/share/fish/vendor_completions.d/strobe.fish
if head -1 "$ZSH" 2>/dev/null | grep -q "^#compdef strobe" && grep -q "complete -c strobe .* -a \"gen\"" "$FISH" 2>/dev/null; then
    pass "zsh ($ZSH) and fish ($FISH) completions installed"
else fail "zsh/fish completions: $(ls -l "$ZSH" "$FISH" 2>&1)"; fi
for sh in zsh fish; do
    if command -v "$sh" >/dev/null; then
        f=$ZSH; [ "$sh" = fish ] && f=$FISH
        if "$sh" -n "$f" 2>/dev/null; then pass "$sh -n accepts its completion"; else fail "$sh -n $f"; fi
    fi
done

if [ "$(stat -c '%U %a' /etc/strobe/token 2>/dev/null)" = "root 600" ] &&
    [ "$(stat -c '%a' /etc/strobe)" = 700 ] && grep -qx '[A-Za-z0-9_-]\{32\}' /etc/strobe/token; then
    pass "postinst made the token: /etc/strobe/token, root's, 0600, 32 characters"
else fail "the token: $(ls -ld /etc/strobe /etc/strobe/token 2>&1)"; fi

# --- 3. the installed units -----------------------------------------------------------------
UNIT="" AGENT=""
for f in "${FILES[@]}"; do
    case $f in */systemd/system/strobe.service) UNIT=$f ;; */systemd/system/strobe-agent.service) AGENT=$f ;; esac
done
if [ -z "$UNIT" ] || [ -z "$AGENT" ]; then
    fail "the package installs no strobe.service and strobe-agent.service: $(printf '%s\n' "${FILES[@]}" | grep systemd)"
    exit 1
fi
for u in "$UNIT" "$AGENT"; do
    # Unknown keys and missing man pages (Documentation=) are only warnings: any output fails.
    out=$(systemd-analyze verify "$u" 2>&1)
    if [ $? = 0 ] && [ -z "$out" ]; then pass "systemd-analyze verify $u"
    else fail "systemd-analyze verify $u: $out"; fi
done
if systemctl is-enabled strobe.service 2>/dev/null | grep -q '^enabled'; then
    fail "the package enabled strobe.service (it must wait for its administrator)"
fi
if cmp -s "$AGENT" "$ROOT/deploy/systemd/strobe-agent.service"; then pass "installed strobe-agent.service is deploy/systemd/strobe-agent.service"
else fail "installed strobe-agent.service differs from deploy/systemd/strobe-agent.service"; fi
# From "the run history" down the two units are one text but ExecStart.
shared() { sed -n '/^# --- the run history/,$p' "$1" | grep -v '^ExecStart='; }
if d=$(diff <(shared "$AGENT") <(shared "$UNIT")) && [ "$(shared "$UNIT" | wc -l)" -gt 40 ]; then
    pass "strobe.service has the agent unit's user, state, capabilities and hardening, line for line ($(shared "$UNIT" | wc -l) lines)"
else fail "strobe.service and strobe-agent.service differ below 'the run history':"$'\n'"$d"; fi

LISTEN=$(sed -n 's/^Environment=STROBE_LISTEN=//p' "$UNIT")
case $LISTEN in
127.0.0.1:* | "[::1]:"*) pass "strobe.service listens on loopback by default ($LISTEN)" ;;
*) fail "strobe.service listens on '$LISTEN' by default, not loopback" ;;
esac
CAPS=$(unit_value "$UNIT" AmbientCapabilities)
if [ -z "$CAPS" ] || [ "$CAPS" != "$(unit_value "$UNIT" CapabilityBoundingSet)" ] || [ "$(unit_value "$UNIT" DynamicUser)" != yes ]; then
    fail "strobe.service: AmbientCapabilities= ($CAPS), CapabilityBoundingSet= or DynamicUser= not as expected"
    exit 1
fi
unit_limits "$UNIT"

# --- 4. a short run as the unit's user, with its capabilities ---------------------------------
make_test_host
runas "$SETPRIV_CAPS"

for backend in afpacket afxdp; do
    out=$(cd / && timeout 60 "${RUNAS[@]}" STROBE_DB=none strobe gen -q --port "$backend:$A" --rx "$backend:$B" \
        --udp 198.18.0.1:1000-198.18.0.2:2000 --count 1000 --rate 10kpps 2>&1)
    row=$(echo "$out" | awk '$1 == "udp" && NF > 8 { print $2, $3, $4; exit }')
    if [ "$row" = "1000 1000 0" ]; then pass "strobe gen over $backend as the unit's user with $CAPS: 1000 sent, 1000 received"
    else fail "strobe gen over $backend as the unit's user: counts '$row':"$'\n'"$out"; fi
done

# strobe serve as the unit starts it: its Environment= lines, its ExecStart, the credential
# systemd would copy from /etc/strobe/token into a directory the service's user alone reads.
CRED=$WORK/credentials STATE=$WORK/state
mkdir -p "$CRED" "$STATE"
cp /etc/strobe/token "$CRED/token"
chown -R "$TUSER:" "$CRED" "$STATE" && chmod 500 "$CRED" && chmod 400 "$CRED/token"
TOKEN=$(cat /etc/strobe/token)
EXEC=$(unit_value "$UNIT" ExecStart)
case $EXEC in "/bin/sh -c '"*) ;; *) fail "ExecStart is not /bin/sh -c '…' any more: update this test"; exit 1 ;; esac
SCRIPT=$(echo "$EXEC" | sed "s/^[^']*'//; s/'\$//; s/\\\$\\\$/\$/g")
mapfile -t UNIT_ENV < <(sed -n 's/^Environment=//p' "$UNIT" | sed 's/^"\(.*\)"$/\1/; s#%S/strobe#'"$STATE"'#g')
(cd / && exec "${RUNAS[@]}" "${UNIT_ENV[@]}" CREDENTIALS_DIRECTORY="$CRED" sh -c "$SCRIPT") > "$WORK/serve.log" 2>&1 &
SERVE=$!
PIDS+=("$SERVE")
HOSTPORT=${LISTEN%:*} PORT=${LISTEN##*:}
listening=0
for _ in $(seq 100); do
    kill -0 "$SERVE" 2>/dev/null || break
    ip netns exec "$NS" bash -c "exec 3<>/dev/tcp/$HOSTPORT/$PORT" 2>/dev/null && { listening=1; break; }
    sleep 0.1
done
if [ "$listening" = 1 ]; then
    pid=$(pgrep -P "$SERVE" -x strobe || echo "$SERVE")
    for _ in $(seq 20); do [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = strobe ] && break; sleep 0.1; pid=$(pgrep -P "$SERVE" -x strobe || echo "$SERVE"); done
    status=$(awk '/^(Uid|CapEff|CapAmb|NoNewPrivs):/ { printf "%s %s ", $1, $2 }' "/proc/$pid/status")
    mask=$(python3 -c '
import sys
nums = {"CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_SYS_NICE": 23, "CAP_BPF": 39}
print(format(sum(1 << nums[c] for c in sys.argv[1:]), "016x"))' $CAPS)
    if echo "$status" | grep -q "Uid: $(id -u "$TUSER") .*CapEff: $mask CapAmb: $mask NoNewPrivs: 1"; then
        pass "strobe serve (the installed unit's ExecStart) runs as the unit's user with exactly $CAPS"
    else fail "strobe serve's process: $status (expected uid $(id -u "$TUSER"), CapEff/CapAmb $mask)"; fi
    if ip netns exec "$NS" bash -c 'exec 3<>/dev/tcp/198.18.0.1/'"$PORT" 2>/dev/null; then
        fail "strobe serve answers on 198.18.0.1:$PORT: the unit's default is loopback only"
    else pass "strobe serve is not reachable beyond loopback"; fi
    for backend in afpacket afxdp; do
        if out=$(ip netns exec "$NS" timeout 60 python3 "$ROOT/tests/deploy/otg_check.py" "http://$LISTEN" "$TOKEN" "$backend:$A" "$backend:$B" 1000 2>&1)
        then pass "strobe serve with the packaged token, $backend: 401 without it; $(echo "$out" | tail -1 | sed 's/^otg_check: //')"
        else fail "strobe serve, $backend: $out"; fi
    done
    kill -TERM "$pid"
    if timeout 15 tail --pid="$SERVE" -f /dev/null; then
        wait "$SERVE"; rc=$?
        if [ $rc = 0 ] && [ -s "$STATE/runs.db" ] && grep -q "from --token-file" "$WORK/serve.log" &&
            ! grep -qF "$TOKEN" "$WORK/serve.log"; then
            pass "serve stops on SIGTERM (exit 0), kept its history in the state directory, never printed the token"
        else fail "serve after SIGTERM: exit $rc, history $(ls "$STATE"), log: $(cat "$WORK/serve.log")"; fi
    else fail "serve did not stop within 15 s of SIGTERM"; fi
else
    fail "strobe serve did not listen on $LISTEN: $(cat "$WORK/serve.log")"
fi

# --- 5. purge ---------------------------------------------------------------------------------
if out=$(dpkg --purge strobe 2>&1); then
    INSTALLED=0
    left=()
    for f in "${FILES[@]}"; do [ -f "$f" ] && left+=("$f"); done
    [ -e /etc/strobe/token ] && left+=(/etc/strobe/token)
    if [ ${#left[@]} = 0 ] && ! command -v strobe >/dev/null; then
        pass "dpkg --purge strobe: none of its ${#FILES[@]} paths' files left, nor the token"
    else fail "after dpkg --purge: ${left[*]}"; fi
else fail "dpkg --purge strobe: $out"; fi
