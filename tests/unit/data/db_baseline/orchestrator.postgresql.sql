-- The orchestrator schema as fluidvim 0.1.0 (before schema migrations) created it with
-- Base.metadata.create_all() on postgresql: test data for the upgrade tests. Never edit.
CREATE TABLE decisions (
	id VARCHAR(36) NOT NULL,
	service VARCHAR(64) NOT NULL,
	status VARCHAR(16) NOT NULL,
	zone VARCHAR(64),
	host VARCHAR(255),
	rule TEXT NOT NULL,
	request_json TEXT NOT NULL,
	total_ms FLOAT NOT NULL,
	created_at FLOAT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_decisions_service ON decisions (service);

CREATE TABLE env_types (
	uid VARCHAR(32) NOT NULL,
	env_json TEXT NOT NULL,
	PRIMARY KEY (uid)
);

CREATE TABLE hosts (
	zone VARCHAR(64) NOT NULL,
	name VARCHAR(255) NOT NULL,
	env_uid VARCHAR(32) NOT NULL,
	labels_json TEXT NOT NULL,
	updated_at FLOAT NOT NULL,
	PRIMARY KEY (zone, name)
);

CREATE INDEX ix_hosts_env_uid ON hosts (env_uid);

CREATE TABLE instances (
	id VARCHAR(64) NOT NULL,
	zone VARCHAR(64) NOT NULL,
	host VARCHAR(255),
	service VARCHAR(64) NOT NULL,
	name VARCHAR(64) NOT NULL,
	status VARCHAR(16) NOT NULL,
	slots_total INTEGER NOT NULL,
	decision_id VARCHAR(36),
	launch_ms FLOAT,
	created_at FLOAT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_instances_service ON instances (service);

CREATE INDEX ix_instances_zone ON instances (zone);

CREATE TABLE launch_records (
	id SERIAL NOT NULL,
	zone VARCHAR(64) NOT NULL,
	service VARCHAR(64) NOT NULL,
	started_at FLOAT NOT NULL,
	finished_at FLOAT,
	ok BOOLEAN,
	ms FLOAT,
	predicted_s FLOAT,
	instance_id VARCHAR(64),
	kind VARCHAR(8),
	error TEXT,
	PRIMARY KEY (id)
);

CREATE INDEX ix_launch_records_service ON launch_records (service);

CREATE INDEX ix_launch_records_zone ON launch_records (zone);

CREATE TABLE network_services (
	id VARCHAR(36) NOT NULL,
	name VARCHAR(64) NOT NULL,
	nsd_id VARCHAR(64) NOT NULL,
	zone VARCHAR(64) NOT NULL,
	status VARCHAR(16) NOT NULL,
	error TEXT,
	plan_json TEXT NOT NULL,
	descriptors_json TEXT NOT NULL,
	networks_json TEXT NOT NULL,
	services_json TEXT NOT NULL,
	instances_json TEXT NOT NULL,
	steps_json TEXT NOT NULL,
	created_at FLOAT NOT NULL,
	updated_at FLOAT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_network_services_name ON network_services (name);

CREATE TABLE services (
	name VARCHAR(64) NOT NULL,
	profile_json TEXT NOT NULL,
	aliases_json TEXT NOT NULL,
	max_queuing_delay_s FLOAT,
	created_at FLOAT NOT NULL,
	PRIMARY KEY (name)
);

CREATE TABLE slot_reports (
	instance VARCHAR(64) NOT NULL,
	service VARCHAR(64) NOT NULL,
	zone VARCHAR(64) NOT NULL,
	host VARCHAR(255) NOT NULL,
	region VARCHAR(64) NOT NULL,
	slots INTEGER NOT NULL,
	exact INTEGER,
	delay_s FLOAT,
	at FLOAT NOT NULL,
	PRIMARY KEY (instance, service)
);

CREATE TABLE zones (
	name VARCHAR(64) NOT NULL,
	kind VARCHAR(16) NOT NULL,
	region VARCHAR(64) NOT NULL,
	labels_json TEXT NOT NULL,
	updated_at FLOAT NOT NULL,
	PRIMARY KEY (name)
);

CREATE TABLE decision_steps (
	decision_id VARCHAR(36) NOT NULL,
	index INTEGER NOT NULL,
	name VARCHAR(16) NOT NULL,
	ms FLOAT NOT NULL,
	record_json TEXT NOT NULL,
	PRIMARY KEY (decision_id, index),
	FOREIGN KEY(decision_id) REFERENCES decisions (id)
);

CREATE TABLE vim_flavors (
	id VARCHAR(36) NOT NULL,
	name VARCHAR(255) NOT NULL,
	ram INTEGER NOT NULL,
	vcpus INTEGER NOT NULL,
	disk INTEGER NOT NULL,
	slots INTEGER,
	created_at FLOAT NOT NULL,
	PRIMARY KEY (id)
);

CREATE TABLE vim_images (
	id VARCHAR(36) NOT NULL,
	zone VARCHAR(64) NOT NULL,
	name VARCHAR(64) NOT NULL,
	location TEXT NOT NULL,
	checksum VARCHAR(64),
	created_at FLOAT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_vim_images_zone ON vim_images (zone);

CREATE TABLE vim_vms (
	id VARCHAR(64) NOT NULL,
	zone VARCHAR(64) NOT NULL,
	name VARCHAR(255) NOT NULL,
	vnf_name VARCHAR(64) NOT NULL,
	description TEXT NOT NULL,
	image_id VARCHAR(36) NOT NULL,
	flavor_id VARCHAR(36) NOT NULL,
	interfaces_json TEXT NOT NULL,
	created_at FLOAT NOT NULL,
	PRIMARY KEY (id)
);

CREATE INDEX ix_vim_vms_zone ON vim_vms (zone);
