-- attribution_end.sql: the step tables attribution.sql leaves for torchscript_modules.sql.
DROP TABLE ks_rows;
DROP TABLE ks_modules;
