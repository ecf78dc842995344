-- The vnf schema as fluidvim 0.1.0 (before schema migrations) created it with
-- Base.metadata.create_all() on sqlite: test data for the upgrade tests. Never edit.
CREATE TABLE launches (
	id INTEGER NOT NULL,
	vnf_id VARCHAR(36) NOT NULL,
	backend VARCHAR(16) NOT NULL,
	kind VARCHAR(8) NOT NULL,
	ok BOOLEAN NOT NULL,
	total_ms FLOAT NOT NULL,
	phases_json TEXT NOT NULL,
	at FLOAT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_launches_at ON launches (at);

CREATE INDEX ix_launches_vnf_id ON launches (vnf_id);

CREATE TABLE vnfs (
	id VARCHAR(36) NOT NULL,
	name VARCHAR(64) NOT NULL,
	backend VARCHAR(16) NOT NULL,
	status VARCHAR(16) NOT NULL,
	spec_json TEXT NOT NULL,
	pool_key VARCHAR(255),
	pid INTEGER,
	config TEXT,
	boot_us INTEGER,
	reason TEXT,
	created_at FLOAT NOT NULL,
	updated_at FLOAT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_vnfs_name ON vnfs (name);

CREATE INDEX ix_vnfs_pool_key ON vnfs (pool_key);

CREATE INDEX ix_vnfs_status ON vnfs (status);

CREATE TABLE nova_instance_names (
	uuid VARCHAR(36) NOT NULL,
	name VARCHAR(255) NOT NULL,
	PRIMARY KEY (uuid)
);

CREATE TABLE nova_slot_services (
	uuid VARCHAR(36) NOT NULL,
	service VARCHAR(255) NOT NULL,
	zone VARCHAR(255),
	PRIMARY KEY (uuid)
);
