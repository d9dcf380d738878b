# Sourced by the plotting scripts: installs Debian's gnuplot-nox (pinned, as tools/install-deps.sh
# pins its packages; any version where that one is gone) when gnuplot is missing.
if ! command -v gnuplot >/dev/null; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
  $SUDO apt-get install -y -q --no-install-recommends gnuplot-nox=5.4.4+dfsg1-2+b2 ||
    $SUDO apt-get install -y -q --no-install-recommends gnuplot-nox
fi
