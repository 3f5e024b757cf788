/* tests/core/lsan_tls_module.c: a module that test_lsan_dynamic_tls loads with dlopen, as the ICD
 * loader loads PoCL (and PoCL its LLVM and clang): its thread-local variables live in dynamic TLS,
 * one block per thread, which glibc allocates with malloc on the thread's first use of them. The
 * block is 16 bytes (two pointers), so that under ASan it comes from the same size class as
 * malloc(16). */
__thread void *ct_tls_held;
__thread void *ct_tls_other;

/* The start of this thread's block (the lower of the two variables' addresses: the linker picks
 * their order), allocating the block on first use. */
void *ct_tls_block(void) {
  char *a = (char *)&ct_tls_held, *b = (char *)&ct_tls_other;
  return a < b ? a : b;
}

void ct_tls_hold(void *p) {
  ct_tls_held = p;
  ct_tls_other = 0;
}

void *ct_tls_get(void) { return ct_tls_held; }
