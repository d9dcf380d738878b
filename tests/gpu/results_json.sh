#!/usr/bin/env bash
# Writes the headline figures of a device run as JSON (docs/gpu-results.json), from what
# run_device_checks.sh measured: results_json.sh SINGLE_STREAM_LOG DVR_OFFLINE_CSV DEVICE DATE.
# A figure whose run did not finish is null.
#
# The ceilings are this GPU's, as measured on these machines (docs/gpu-results.md): HBM at
# 4.3 TB/s (a device-to-device copy, bytes read and written) and bf16 tensor-core products at
# 790 TFLOP/s (8192^3 on random data).
set -euo pipefail
single=$1 csv=$2 device=$3 date=$4
hbm_bytes_per_s=4.3e12
bf16_flop_per_s=790e12
awk -v device="$device" -v date="$date" -v hbm="$hbm_bytes_per_s" -v peak="$bf16_flop_per_s" '
  function num(x) { return x == "" ? "null" : x }
  function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "" : sprintf("%.3f", a / b) }
  FNR == 1 { file++ }
  # llm42 bench: "model PATH: 15009.3 MB of weights per token, ..." and its table rows.
  file == 1 && match($0, /: [0-9.]+ MB of weights per token/) {
    split(substr($0, RSTART + 2), w, " "); weights_mb = w[1]
  }
  file == 1 && /^\| fast *\| tg[0-9]+ @ d0 \|/ { split($0, f, "|"); tg = f[4] + 0 }
  file == 1 && /^\| fast *\| pp[0-9]+ @ d0 \|/ && match($0, /GEMM work at [0-9.]+ GFLOP\/s/) {
    split(substr($0, RSTART), g, " "); pp_gflops = g[4]
  }
  # llm42 bench-dvr --csv: mode,det_share,...,output_tps,vs_off,recompute_pct,...,temperature,...
  file == 2 && FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  file == 2 && $col["temperature"] == 0.8 {
    key = $col["mode"] "@" ($col["det_share"] + 0)
    tps[key] = $col["output_tps"]; recompute[key] = $col["recompute_pct"]
  }
  END {
    floor_fraction = (weights_mb == "" || tg == "") ? "" : sprintf("%.3f", weights_mb * 1e6 / hbm * tg)
    prefill_fraction = pp_gflops == "" ? "" : sprintf("%.3f", pp_gflops * 1e9 / peak)
    printf "{\n"
    printf "  \"device\": \"%s\",\n  \"date\": \"%s\",\n", device, date
    printf "  \"batch1_floor_fraction\": %s,\n", num(floor_fraction)
    printf "  \"prefill_tensor_peak_fraction\": %s,\n", num(prefill_fraction)
    printf "  \"off_output_tok_s\": %s,\n", num(tps["off@0"])
    printf "  \"batch_invariant_vs_off\": %s,\n", num(ratio(tps["batch_invariant@1"], tps["off@0"]))
    printf "  \"selective10_vs_off\": %s,\n", num(ratio(tps["selective@0.1"], tps["off@0"]))
    printf "  \"selective100_vs_batch_invariant\": %s,\n", num(ratio(tps["selective@1"], tps["batch_invariant@1"]))
    printf "  \"recompute_pct_t08\": %s\n", num(recompute["selective@0.1"])
    printf "}\n"
  }' FS='[ ,]' "$single" FS=, "$csv"
