/* anvil_hgemm.h: HGEMM kernels found by Anvil for one GPU model, behind one
 * C call that falls back to cuBLASLt/cuBLAS wherever no kernel won.
 *
 * C = A * op(B): A, B and C are fp16 (__half), accumulation is fp32.
 *   ANVIL_HGEMM_NT: A row-major MxK, B row-major NxK, C = A * B^T
 *                   (torch.nn.functional.linear; BLAS "TN")
 *   ANVIL_HGEMM_NN: A row-major MxK, B row-major KxN, C = A * B (torch.matmul)
 * C is always row-major MxN. Buffers are exactly these sizes.
 *
 * Dispatch on (layout, M, N, K): a shape in the table (manifest.json) runs its
 * kernel; every other shape runs cuBLASLt with the algorithm Anvil tuned for
 * it (when the package carries one) or cublasGemmEx. When this machine differs
 * from the one the figures were measured on (GPU model, arch, driver, CUDA
 * runtime, cuBLAS version), the table is not used at all: everything goes to
 * cuBLAS, anvil_hgemm_status() says why, and one line is printed on stderr.
 *
 * Thread-safety: every function may be called from any number of threads.
 * cuBLAS/cuBLASLt handles are per thread and per device, created on the
 * thread's first vendor call (or anvil_hgemm_init) and reused by later threads
 * once their owner exits.
 *
 * CUDA graphs: anvil_hgemm enqueues work on `stream` only: it never allocates,
 * synchronises or creates handles while `stream` is capturing. Call
 * anvil_hgemm_init() on each thread (with the device current) before it
 * captures; a vendor-path call inside a capture on a thread without handles
 * returns ANVIL_HGEMM_NOT_INITIALIZED instead of creating them. The caller owns
 * the workspace (device memory, 256-byte aligned, at least
 * anvil_hgemm_workspace_bytes); one workspace must not be used by two
 * streams at once.
 */
#ifndef ANVIL_HGEMM_H_
#define ANVIL_HGEMM_H_

#include <stddef.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Operand layouts (the numbering of Anvil's problem key). */
enum { ANVIL_HGEMM_NT = 1, ANVIL_HGEMM_NN = 2 };

/* Status codes. */
enum {
  ANVIL_HGEMM_OK = 0,
  ANVIL_HGEMM_INVALID_ARGUMENT = 1,    /* bad layout, a dimension < 1, a null operand */
  ANVIL_HGEMM_WORKSPACE_TOO_SMALL = 2, /* the shape's kernel needs more workspace */
  ANVIL_HGEMM_NOT_INITIALIZED = 3,     /* vendor call inside a capture, no handle on this thread */
  ANVIL_HGEMM_CUDA_ERROR = 4,          /* a CUDA runtime call failed */
  ANVIL_HGEMM_CUBLAS_ERROR = 5,        /* cuBLAS or cuBLASLt failed */
  ANVIL_HGEMM_KERNEL_ERROR = 6,        /* the shape's kernel returned an error */
  ANVIL_HGEMM_VALIDATION_MISMATCH = 7  /* status only: the table is off on this device */
};

/* Where a shape goes. */
enum { ANVIL_HGEMM_PATH_KERNEL = 1, ANVIL_HGEMM_PATH_CUBLASLT = 2, ANVIL_HGEMM_PATH_CUBLAS = 3 };

/* C = A * op(B) on `stream` for the current device. Returns a status code. */
int anvil_hgemm(int layout, int M, int N, int K, const void* A, const void* B, void* C,
                void* workspace, size_t workspace_bytes, cudaStream_t stream);

/* Workspace bytes anvil_hgemm needs for this shape on the current device
 * (the vendor paths ask for what their figures were measured with). */
size_t anvil_hgemm_workspace_bytes(int layout, int M, int N, int K);

/* Where the shape goes on the current device: an ANVIL_HGEMM_PATH_* value, or
 * 0 for invalid arguments. *name (when not null) receives the kernel's name,
 * "cublaslt" or "cublas" (a static string). */
int anvil_hgemm_dispatch(int layout, int M, int N, int K, const char** name);

/* Validates the current device and creates this thread's handles for it.
 * Call before capturing on a thread. Returns a status code. */
int anvil_hgemm_init(void);

/* ANVIL_HGEMM_OK when the table is in use on the current device, else
 * ANVIL_HGEMM_VALIDATION_MISMATCH; the message says why (static string). */
int anvil_hgemm_status(void);
const char* anvil_hgemm_status_message(void);
const char* anvil_hgemm_status_string(int status);

/* The dispatch table: shapes served by kernels or by a tuned cuBLASLt
 * algorithm, in table order. Returns 0, or 1 for an index out of range. */
int anvil_hgemm_table_size(void);
int anvil_hgemm_table_entry(int index, int* layout, int* M, int* N, int* K);

#ifdef __cplusplus
}
#endif

#endif /* ANVIL_HGEMM_H_ */
