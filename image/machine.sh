# Sourced by image/build.sh and tests/image/run.sh: what building and running the image needs on
# this machine, installed from Debian's packages when missing (as tests/browser/run.sh installs
# Chromium), and a Docker engine started when none answers.

# Installs Debian packages that are missing; names them first.
install_debian_packages() {
    local missing=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if ! command -v apt-get >/dev/null; then
        echo "image: ${missing[*]} missing and no apt-get to install them" >&2
        exit 2
    fi
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "== installing ${missing[*]} from Debian's packages"
    $sudo apt-get update -qq
    # env: sudo's env_reset would drop the variable.
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" > /dev/null
}

# Makes `docker info` answer: installs Debian's docker.io when there is no dockerd, and starts
# dockerd (logging to target/image/dockerd.log) when no engine is running.
ensure_docker() {
    local said
    if said=$(docker info 2>&1 >/dev/null); then
        return 0
    fi
    if grep -qi "permission denied" <<<"$said"; then
        echo "image: a Docker engine runs but this user may not use its socket ($said);" \
            "add the user to the docker group or run as root" >&2
        exit 2
    fi
    command -v dockerd >/dev/null || install_debian_packages docker.io
    mkdir -p target/image
    echo "== starting dockerd (log: target/image/dockerd.log)"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # setsid: the engine outlives this script, as a system's dockerd would.
    $sudo setsid dockerd > target/image/dockerd.log 2>&1 < /dev/null &
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    echo "image: dockerd did not answer within 30 s; its log:" >&2
    tail -n 20 target/image/dockerd.log >&2
    exit 2
}

