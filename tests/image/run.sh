#!/usr/bin/env bash
# The image tested as `meshlife install gatekeeper`'s Deployment runs it (tests/image/image_test.py
# says how): builds it with image/build.sh first (a no-op rebuild when nothing changed), so that
# the image under test is this clone's.
set -euo pipefail
cd "$(dirname "$0")/../.."
source image/machine.sh
install_debian_packages python3-yaml openssl
bash image/build.sh
# Debian's python3 with the python3-yaml installed above, whatever python3 comes first on PATH.
/usr/bin/python3 tests/image/image_test.py "$(cat target/image/reference)" \
    "$(cat target/image/action-reference)"
# The pre-commit hook that runs this image (language: docker_image), as pre-commit runs it.
bash tests/pre-commit/run.sh meshlife-docker
