-- kernel_names.sql: kernel_short(kernel), the short name the CLI's tables show for a kernel (docs/analysis.md,
-- "Kernel names"). A C++ name (one holding '<' or '::') loses its return type, parameter lists, namespaces,
-- lambda and operator() chains, its template arguments that are numbers, booleans, scalar types or
-- TensorIterator plumbing, and the wrapper templates of ATen's elementwise and reduce kernels, so what is
-- left is the kernel and the functors that tell it apart:
--   void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)::{lambda()#2}...>(...)
--   -> vectorized_elementwise_kernel<GeluCUDAKernelImpl>
-- Any other name (triton, cuBLAS, cuDNN, CUTLASS, Tensile, memcpy) is kept. Either is cut to 80 characters.
-- Each macro reads its argument once (DuckDB inlines macros), so the passes nest without growing.

-- one pass over the innermost parentheses: parameter lists, casts, lambda signatures
CREATE OR REPLACE MACRO ks_kn_unparen(s) AS regexp_replace(s, '\([^()]*\)', '', 'g');

-- the words a template argument may be made of and still say nothing about which kernel it is
CREATE OR REPLACE MACRO ks_kn_noise() AS
    '(?:-?[0-9]+[uUlL]*|true|false|void|bool|char|short|int|long|float|double|unsigned|signed|const|volatile'
    || '|Half|BFloat16|__half|__nv_bfloat16|__hip_bfloat16|bfloat16_t|half_t|float[24]|int[234]|size_t'
    || '|array|Array|OffsetCalculator|TrivialOffsetCalculator|LoadWithoutCast|StoreWithoutCast|OpaqueType'
    || '|LoadWithCast|StoreWithCast|TensorListMetadata|policy_hub|NullType|ScanTileState|use_default|[*&])'
    || '(?: ?(?:[*&]|const|int|long|char))*(?:<[^<>]*>)?';

-- one pass that drops noise arguments (the first, a later one, the only one) and empty argument lists
CREATE OR REPLACE MACRO ks_kn_denoise(s) AS
    regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(s,
        ', ' || ks_kn_noise() || '([,>])', '\1', 'g'),
        ', ' || ks_kn_noise() || '([,>])', '\1', 'g'),
        '<' || ks_kn_noise() || ', ', '<', 'g'),
        '<' || ks_kn_noise() || '>', '', 'g'),
        '<>', '', 'g'),
        ' +>', '>', 'g');

-- one pass that replaces an innermost wrapper template by what it wraps
CREATE OR REPLACE MACRO ks_kn_unwrap(s) AS
    regexp_replace(s, '\b(?:ReduceOp|func_wrapper_t|AUnaryFunctor|BUnaryFunctor|BinaryFunctor|gpu_kernel_impl'
                      || '|gpu_kernel_impl_nocast)<([^<>]*)>', '\1', 'g');

CREATE OR REPLACE MACRO ks_kn_cpp(name) AS
    ks_kn_unwrap(ks_kn_unwrap(ks_kn_unwrap(
    ks_kn_denoise(ks_kn_denoise(ks_kn_denoise(ks_kn_denoise(
    regexp_replace(                                              -- namespaces
    regexp_replace(                                              -- a template's member types (policy<…>::P)
    regexp_replace(                                              -- lambda and operator() chains, const
    ks_kn_unparen(ks_kn_unparen(ks_kn_unparen(ks_kn_unparen(ks_kn_unparen(ks_kn_unparen(
    regexp_replace(replace(name, '(anonymous namespace)::', ''), '^void ', '')
    )))))),
        '::\{[^}]*\}|::operator(?: const)?| const\b', '', 'g'),
        '>::[A-Za-z_][A-Za-z0-9_]*', '>', 'g'),
        '\b[A-Za-z_][A-Za-z0-9_]*::', '', 'g')
    )))))));

CREATE OR REPLACE MACRO ks_kn_cut(s) AS CASE WHEN length(s) > 80 THEN left(s, 79) || '…' ELSE s END;

CREATE OR REPLACE MACRO kernel_short(kernel) AS
    ks_kn_cut(CASE WHEN contains(kernel, '<') OR contains(kernel, '::') THEN ks_kn_cpp(kernel) ELSE kernel END);
