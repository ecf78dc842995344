-- The evaluator schema as fluidvim 0.1.0 (before schema migrations) created it with
-- Base.metadata.create_all() on postgresql: test data for the upgrade tests. Never edit.
CREATE TABLE evaluator_probe_results (
	id SERIAL NOT NULL,
	env_uid VARCHAR(64) NOT NULL,
	kind VARCHAR(32) NOT NULL,
	zone VARCHAR(255) NOT NULL,
	ok BOOLEAN NOT NULL,
	metrics_json TEXT NOT NULL,
	measured_at FLOAT NOT NULL,
	valid_for_s FLOAT NOT NULL,
	valid_until FLOAT NOT NULL,
	error TEXT,
	PRIMARY KEY (id)
);

CREATE INDEX ix_evaluator_probe_results_valid_until ON evaluator_probe_results (valid_until);

CREATE INDEX ix_evaluator_probe_uid_kind ON evaluator_probe_results (env_uid, kind, measured_at);
