-- kernel_short.sql: kernel_short(name), a kernel's name short enough for a table cell or a chart label: a C++
-- kernel's base name without namespaces, and the first type or functor its template names, e.g.
-- `void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(…)…>(…)` ->
-- `vectorized_elementwise_kernel<GeluCUDAKernelImpl>`; any other name (`Memcpy HtoD (Pageable -> Device)`,
-- `nvjet_sm90_hsh_64x8…`, `triton_poi_fused_add_0`) as it is. Created only where no kernel_short is defined.
--   ks_kernel_signature(name): the name without its return type (`void`, `std::enable_if<…>::type`) and without
--     `(anonymous namespace)::`, so that it starts with the qualified base name;
--   ks_kernel_head(signature): that qualified base name when a template or argument list follows it, else '';
--   ks_kernel_first_type(arguments): the first identifier of a template's arguments (`4, at::native::Gelu…` ->
--     `Gelu…`: numbers are not identifiers; a qualified name's last part, followed by `<`, `>`, `,`, `(` or space).
CREATE TEMP MACRO IF NOT EXISTS ks_kernel_signature(name) AS
    regexp_replace(regexp_replace(regexp_replace(name, '^void\s+', ''), '^std::enable_if<[^>]*>::type\s+', ''),
                   '\(anonymous namespace\)::', '', 'g');

CREATE TEMP MACRO IF NOT EXISTS ks_kernel_head(signature) AS
    regexp_extract(signature, '^([A-Za-z_][A-Za-z0-9_:]*)[<(]', 1);

CREATE TEMP MACRO IF NOT EXISTS ks_kernel_first_type(arguments) AS
    regexp_extract(arguments, '([A-Za-z_][A-Za-z0-9_]*)(?:[<>,(\s]|$)', 1);

CREATE TEMP MACRO IF NOT EXISTS kernel_short(name) AS
    CASE WHEN ks_kernel_head(ks_kernel_signature(name)) = '' THEN name
         ELSE regexp_replace(ks_kernel_head(ks_kernel_signature(name)), '^.*::', '')
              || CASE WHEN substr(ks_kernel_signature(name), length(ks_kernel_head(ks_kernel_signature(name))) + 1, 1) = '<'
                           AND ks_kernel_first_type(substr(ks_kernel_signature(name),
                                                           length(ks_kernel_head(ks_kernel_signature(name))) + 2)) <> ''
                      THEN '<' || ks_kernel_first_type(substr(ks_kernel_signature(name),
                                                              length(ks_kernel_head(ks_kernel_signature(name))) + 2))
                           || '>'
                      ELSE '' END
    END;
