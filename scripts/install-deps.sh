#!/usr/bin/env bash
# Install every build and test dependency from Debian when missing (fresh Debian 12, root).
set -euo pipefail
PKGS=(build-essential cmake pkg-config libevent-dev libcjson-dev libssl-dev libsqlite3-dev zlib1g-dev
      libxlsxwriter-dev libcmocka-dev python3 python3-dev python3-pytest python3-openpyxl
      python3-setuptools python3-pip python3-wheel sqlite3 procps iproute2 util-linux
      python3-torch chromium clang libclang-rt-14-dev rpm systemd python3-venv binutils dpkg-dev
      openssl prometheus libprotobuf-c-dev protobuf-c-compiler libsnappy-dev libcurl4-openssl-dev
      python3-prometheus-client python3-protobuf python3-yaml)
# rpm (rpmbuild), systemd (systemd-analyze verify), python3-venv, binutils (objdump) and
# dpkg-dev (dpkg-source, for the cjson source that scripts/package.sh links statically) serve
# scripts/package.sh and tests/e2e/test_package.py.
# python3-torch (Debian 12: 1.13.1, CPU; ~600 MB with its ~175 dependencies) runs the
# real-PyTorch tests (tests/e2e/test_python_torch.py, test_step_hook.py::test_real_torch), which
# skip without it. chromium (headless) renders the HTML report in tests/e2e/test_report_browser.py.
# clang + libclang-rt-14-dev: the libFuzzer build of the parsers (scripts/fuzz.sh).
# openssl (CLI): the TLS tests generate their certificates. prometheus, python3-prometheus-client:
# the real Prometheus server and exposition parser of the telemetry tests. python3-yaml: the
# Kubernetes manifests of packaging/kubernetes/ in test_deploy_manifests.py. protobuf-c, snappy and
# libcurl: the daemon's remote-write logger.
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]} (run as root)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all dependencies present"
