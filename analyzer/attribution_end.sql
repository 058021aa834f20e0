-- attribution_end.sql: the step tables attribution.sql leaves for torchscript_modules.sql, and ks_functions, which
-- attribution_rows.sql's last statement reads.
DROP TABLE ks_rows;
DROP TABLE ks_modules;
DROP TABLE ks_functions;
