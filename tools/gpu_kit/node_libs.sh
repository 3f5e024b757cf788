# tools/gpu_kit/node_libs.sh: the libraries the GPU kit takes from the node, not from Debian: the C
# runtime (every node has it, and an older copy first on the path would break the node's own
# programs) and the CUDA and driver libraries (found by run.sh in the toolkit or the PyTorch
# wheels). scripts/gpu_kit.sh carries every other library ldd names; run.sh's ldd step allows
# only these outside the kit. Sourced by both (sh).
ct_kit_node_lib() { # ct_kit_node_lib SONAME: 0 for a library of the node
  case "$1" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|linux-vdso*) return 0 ;;
    libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*|libnvidia*|libnvrtc*|libnvJitLink*) return 0 ;;
  esac
  return 1
}
