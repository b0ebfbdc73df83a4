/* test_trace_frames_fold.c — grt_trace_frames_fold on stacks shaped like the ones real PyTorch
 * snapshots record (hand-written: eager, compiled, autograd's thread, a destructor, an extension,
 * Windows paths), the path rules, and the edges of the call (cap, NULL, empty). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gpurt/trace.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

#define F(name, file, line) \
  { name, file, line }

/* The shape of an eager-mode allocation in a real snapshot: the recorder, the allocator, ATen and
 * the dispatcher, the Python binding, the interpreter, the user's lines, then the interpreter's and
 * libc's start-up. */
static const grt_trace_frame eager[] = {
    F("torch::unwind::unwind()", "??", 0),
    F("torch::CapturedTraceback::gather(bool, bool, bool)", "??", 0),
    F("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp", 0),
    F("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
      "CUDACachingAllocator.cpp", 0),
    F("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)", "", 0),
    F("at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>)", "??", 0),
    F("at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA__empty_strided(c10::ArrayRef<c10::SymInt>)",
      "RegisterCUDA.cpp", 0),
    F("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<at::Tensor (c10::ArrayRef<"
      "c10::SymInt>)> >::call(c10::OperatorKernel*, c10::DispatchKeySet)",
      "RegisterBackendSelect.cpp", 0),
    F("at::_ops::empty_strided::call(c10::ArrayRef<c10::SymInt>, std::optional<bool>)", "??", 0),
    F("torch::autograd::THPVariable_cuda(_object*, _object*, _object*)", "python_variable_methods.cpp", 0),
    F("method_vectorcall_VARARGS_KEYWORDS", "/usr/local/src/conda/python-3.10.14/Objects/descrobject.c", 344),
    F("_PyObject_VectorcallTstate", "/usr/local/src/conda/python-3.10.14/Include/cpython/abstract.h", 114),
    F("forward", "/home/u/proj/model.py", 54), /* 12 */
    F("_call_impl", "/home/u/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", 1747),
    F("_wrapped_call_impl", "/home/u/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", 1736),
    F("forward", "/home/u/proj/model.py", 245),  /* 15 */
    F("<module>", "/home/u/proj/train.py", 131), /* 16 */
    F("_PyEval_EvalFrameDefault", "??", 0),
    F("PyEval_EvalCode", "/usr/local/src/conda/python-3.10.14/Python/ceval.c", 1134),
    F("run_eval_code_obj", "/usr/local/src/conda/python-3.10.14/Python/pythonrun.c", 1291),
    F("_run_module_as_main", "<frozen runpy>", 198),
    F("__libc_start_call_main", "./csu/../sysdeps/nptl/libc_start_call_main.h", 58),
    F("__libc_start_main_impl", "./csu/../csu/libc-start.c", 392),
    F("_start", "??", 0),
};

/* Python frames only, Windows paths (a snapshot recorded without C++ frames). */
static const grt_trace_frame windows[] = {
    F("forward", "D:\\Dev\\a2\\cs336_basics\\model.py", 54),
    F("_call_impl", "D:\\Dev\\a2\\.venv\\Lib\\site-packages\\torch\\nn\\modules\\module.py", 1790),
    F("_wrapped_call_impl", "D:\\Dev\\a2\\.venv\\Lib\\site-packages\\torch\\nn\\modules\\module.py", 1779),
    F("forward", "D:\\Dev\\a2\\cs336_basics\\model.py", 245),
    F("<module>", "D:\\Dev\\a2\\cs336_systems\\benchmarking_script.py", 65),
};

/* Compiled code: inductor's generated module and torch's Python, no user frame. */
static const grt_trace_frame compiled[] = {
    F("torch::unwind::unwind()", "??", 0),
    F("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)", "", 0),
    F("call", "/tmp/torchinductor_u/oc/coc6o35wl7af7azzl5r7jqcstkjj.py", 364),
    F("_run_from_cache", "/home/u/Documents/torch/lib/python3.10/site-packages/torch/_inductor/output_code.py", 638),
    F("dynamo__custom_eval_frame", "", 0),
    F("_fn", "/home/u/pytorch/torch/_dynamo/eval_frame.py", 1181),
};

/* The autograd engine's thread: no Python at all. */
static const grt_trace_frame backward[] = {
    F("torch::unwind::unwind()", "??", 0),
    F("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, CUstream_st*)",
      "CUDACachingAllocator.cpp", 0),
    F("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*)", "??", 0),
    F("at::_ops::div_Tensor::call(at::Tensor const&, at::Tensor const&)", "??", 0),
    F("torch::autograd::generated::MeanBackward0_apply_functional(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
      "Functions.cpp", 0),
    F("torch::autograd::generated::MeanBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "??",
      0),
    F("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", "??", 0),
    F("std::error_code::default_error_condition() const", "??", 0),
    F("start_thread", "./nptl/pthread_create.c", 442),
    F("__clone3", "./misc/../sysdeps/unix/sysv/linux/x86_64/clone3.S", 81),
};

/* A free from a tensor's destructor on that thread: only the innermost frame past the allocator. */
static const grt_trace_frame destructor[] = {
    F("torch::unwind::unwind()", "??", 0),
    F("torch::CapturedTraceback::gather(bool, bool, bool)", "??", 0),
    F("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::free(void*)", "", 0),
    F("c10::intrusive_ptr<c10::StorageImpl, c10::detail::intrusive_target_default_null_type<c10::StorageImpl> >::reset_()",
      "", 0),
    F("c10::TensorImpl::~TensorImpl()", "", 0),
    F("THPVariable_clear(THPVariable*)", "python_variable.cpp", 0),
    F("(anonymous namespace)::THPFunction_apply(_object*, _object*)", "python_function.cpp", 0),
};

/* A user's C++ extension: kept after the user's Python frames; PyTorch's own C++ is not, whatever
 * the return type or the arguments say. */
static const grt_trace_frame extension[] = {
    F("void at::cuda::blas::gemm<float>(char, char, long)", "", 0),
    F("std::tuple<at::Tensor, at::Tensor> my_ext::fused_attention(at::Tensor const&)", "fused.cpp", 88),
    F("my_ext::launch_start(at::Tensor const&)", "fused.cpp", 12),                /* memory_viz omits "_start" */
    F("pybind11::cpp_function::dispatcher(_object*, _object*, _object*)", "", 0), /* the binding layer */
    F("on_train_start", "/home/u/proj/hooks.py", 9),
    F("??", "fused.cpp", 0),
    F("main", "/home/u/proj/train.py", 3),
};

static void expect_fold(const grt_trace_frame *frames, size_t n, const size_t *want, size_t n_want) {
  size_t keep[32];
  memset(keep, 0xff, sizeof keep);
  assert_int_equal(grt_trace_frames_fold(frames, n, keep, 32), n_want);
  if (n_want) assert_memory_equal(keep, want, n_want * sizeof *want);
}

static void test_fold_shapes(void **state) {
  (void)state;
  static const size_t w_eager[] = {12, 15, 16};
  expect_fold(eager, N(eager), w_eager, N(w_eager));
  static const size_t w_windows[] = {0, 3, 4};
  expect_fold(windows, N(windows), w_windows, N(w_windows));
  static const size_t w_compiled[] = {2, 3, 5}; /* torch's Python: nothing of the user's remains */
  expect_fold(compiled, N(compiled), w_compiled, N(w_compiled));
  static const size_t w_backward[] = {4, 5};
  expect_fold(backward, N(backward), w_backward, N(w_backward));
  static const size_t w_destructor[] = {3};
  expect_fold(destructor, N(destructor), w_destructor, N(w_destructor));
  static const size_t w_extension[] = {4, 6, 1};
  expect_fold(extension, N(extension), w_extension, N(w_extension));
  /* only the recorder and the allocator: nothing to show */
  expect_fold(eager, 5, NULL, 0);
}

static void test_fold_paths(void **state) {
  (void)state;
  static const grt_trace_frame user_dirs[] = {
      F("a", "/home/u/torch/train.py", 1), /* a folder named torch */
      F("b", "/home/u/Documents/torch/lib/python3.10/site-packages/transformers/x.py", 2),
      F("c", "/usr/lib/python3/dist-packages/torch/functional.py", 3), /* torch's */
      F("d", "C:\\src\\pytorch\\torch\\nn\\functional.py", 4),         /* torch's, a checkout */
      F("e", "/tmp/torchinductor_me/ab/cab.py", 5),                    /* torch's, generated */
      F("f", "/home/u/notorchinductor_x/y.py", 6),                     /* not a torchinductor_ dir */
      F("g", "/home/u/model.pyc", 7),                                  /* not a .py file */
  };
  static const size_t want[] = {0, 1, 5, 6};
  expect_fold(user_dirs, N(user_dirs), want, N(want));
  static const grt_trace_frame interp[] = {
      F("slot_tp_call", "../Objects/typeobject.c", 7494),
      F("cfunction_call", "Python\\ceval.c", 1),
      F("parse", "/src/cpython/Parser/parser.c", 3),
      F("helper", "Modules/_ctypes.c", 3),
      F("inc", "/usr/include/c++/Include/x.h", 3),
      F("PyInit__collections", "", 0),
      F("_PyMem_SetupAllocators", "", 0),
      F("start_thread", "x.c", 1),
      F("__clone", "x.c", 1),
      F("kept_native", "src/ObjectsX/y.c", 1), /* a folder merely starting like CPython's */
  };
  static const size_t want_interp[] = {9};
  expect_fold(interp, N(interp), want_interp, N(want_interp));
}

static void test_fold_edges(void **state) {
  (void)state;
  size_t keep[2] = {99, 99};
  assert_int_equal(grt_trace_frames_fold(eager, N(eager), keep, 2), 3); /* the count, not the cap */
  assert_int_equal(keep[0], 12);
  assert_int_equal(keep[1], 15);
  assert_int_equal(grt_trace_frames_fold(eager, N(eager), NULL, 0), 3);
  assert_int_equal(grt_trace_frames_fold(eager, N(eager), NULL, 5), 3); /* NULL keep: cap taken as 0 */
  keep[0] = 99;
  assert_int_equal(grt_trace_frames_fold(eager, N(eager), keep, 0), 3);
  assert_int_equal(keep[0], 99);
  assert_int_equal(grt_trace_frames_fold(NULL, 5, keep, 2), 0);
  assert_int_equal(grt_trace_frames_fold(eager, 0, keep, 2), 0);
  keep[0] = 99;
  assert_int_equal(grt_trace_frames_fold(destructor, N(destructor), keep, 0), 1);
  assert_int_equal(keep[0], 99);
  static const grt_trace_frame nulls[] = {F(NULL, "a.py", 1), F("f", NULL, 2), F("g", "b.py", 3)};
  static const size_t want[] = {2};
  expect_fold(nulls, N(nulls), want, 1);
  expect_fold(nulls, 2, NULL, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fold_shapes),
      cmocka_unit_test(test_fold_paths),
      cmocka_unit_test(test_fold_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
