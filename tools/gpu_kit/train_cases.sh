# tools/gpu_kit/train_cases.sh: the training runs of the GPU kit, one list for both sides: the CPU's
# reference runs (scripts/gpu_kit.sh, on the build machine) and the same runs on cuda:0 (run.sh),
# compared by test accuracy (issue 17: within 0.5 points of the CPU's same-seed run). Sourced by sh.
# A case is NAME; its arguments to `cuttle train` come from ct_train_case_args.

ct_train_cases() { echo "mlp cnn mlp_bf16 mlp_f16 cnn_bf16 cnn_f16 cnn_cl"; }

ct_train_case_model() { case "$1" in mlp*) echo mlp ;; *) echo cnn ;; esac; }

# One epoch, seed 0, the CLI's defaults otherwise (Adam, lr 1e-3, cosine, batch 128).
ct_train_case_args() {
  a="--model $(ct_train_case_model "$1") --epochs 1 --seed 0"
  case "$1" in
    *_bf16) a="$a --amp bf16" ;;
    *_f16) a="$a --amp f16" ;;
    *_cl) a="$a --channels-last" ;;
  esac
  echo "$a"
}

# Every case has a CPU reference of its own: autocast on the CPU runs the same policy (the same ops
# in float16/bfloat16), so the GPU's run is compared with the same arithmetic, not with float32.
ct_train_case_has_cpu_ref() { return 0; }
