#!/usr/bin/env bash
# Plots `llm42 bench-dvr --csv FILE` output as a PNG, like the LLM-42 paper's figures:
# throughput relative to mode off per mode, and the window x group sweep at 100 % deterministic.
#   tools/plot_dvr.sh results.csv plot.png [TEMPERATURE]   (default 0.8)
set -euo pipefail
csv=$1
png=$2
temp=${3:-0.8}
source "$(dirname "$0")/need-gnuplot.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Columns: 14 temperature, 15 DVR variant ("-" outside mode selective).
# Panel 1: one bar per mode and DVR variant at the default window 64 and group 8.
awk -F, -v t="$temp" 'NR>1 && $14==t && $3==64 && $4==8 {
  label = ($1=="selective") ? sprintf("sel %g%% %s", $2*100, $15) : $1;
  printf "\"%s\" %s %s\n", label, $6, $7 }' "$csv" > "$tmp/modes.dat"
# Panel 2, where the CSV has a sweep (--windows): the paper's fixed-window sweep at 100 %,
# throughput relative to off by window.
awk -F, -v t="$temp" 'NR>1 && $14==t && $1=="selective" && $2==1 && $15=="paper" { print $4, $3, $6 }' "$csv" | sort -n -k1,1 -k2,2 > "$tmp/sweep.dat"
groups=$(cut -d' ' -f1 "$tmp/sweep.dat" | sort -un | tr '\n' ' ')
plots=""
for g in $groups; do
  awk -v g="$g" '$1==g { print $2, $3 }' "$tmp/sweep.dat" > "$tmp/g$g.dat"
  plots="$plots \"$tmp/g$g.dat\" using 1:2 with linespoints lw 2 title \"G = $g\","
done
panels=2 width=1200 sweep=""
if [[ -z $plots ]]; then
  panels=1 width=640
else
  sweep="set title \"100 % deterministic: window x verify group\"
set xlabel \"window W (tokens)\"
set logscale x 2
set xtics norotate
set ylabel \"fraction of off\"
plot ${plots%,}"
fi
gnuplot <<GP
set terminal pngcairo size $width,480 font ",11" noenhanced
set output "$png"
set multiplot layout 1,$panels
set title "Output throughput relative to mode off (T = $temp)"
set style fill solid 0.7
set boxwidth 0.6
set yrange [0:*]
set ylabel "fraction of off"
set xtics rotate by -30
set grid ytics
plot "$tmp/modes.dat" using 0:2:xtic(1) with boxes notitle, \
     "" using 0:2:(sprintf("%.2f", \$2)) with labels offset 0,0.7 notitle
$sweep
unset multiplot
GP
echo "wrote $png"
