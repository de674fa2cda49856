-- A batch-size database as upstream Zeus 0.16's server leaves it on SQLite: the DDL is what
-- SQLAlchemy 2 emits for zeus/optimizer/batch_size/server/database/schema.py (CreateTable on the
-- sqlite dialect); the rows are one job in the pruning stage after two trials, in SQLAlchemy's
-- storage forms (enum member names, naive DATETIME text, booleans 0/1). No version table.
CREATE TABLE "Job" (
	job_id VARCHAR(400) NOT NULL,
	job_id_prefix VARCHAR(300) NOT NULL,
	default_batch_size INTEGER NOT NULL,
	higher_is_better_metric BOOLEAN NOT NULL,
	eta_knob FLOAT NOT NULL,
	beta_knob FLOAT,
	target_metric FLOAT NOT NULL,
	max_epochs INTEGER NOT NULL,
	num_pruning_rounds INTEGER NOT NULL,
	window_size INTEGER NOT NULL,
	max_power FLOAT NOT NULL,
	number_of_gpus INTEGER NOT NULL,
	gpu_model VARCHAR(30) NOT NULL,
	mab_prior_mean FLOAT NOT NULL,
	mab_prior_precision FLOAT NOT NULL,
	mab_num_explorations INTEGER NOT NULL,
	mab_seed INTEGER,
	mab_random_generator_state VARCHAR(10000),
	exp_default_batch_size INTEGER NOT NULL,
	stage VARCHAR(7) NOT NULL,
	min_cost FLOAT,
	min_cost_batch_size INTEGER NOT NULL,
	PRIMARY KEY (job_id)
);
CREATE TABLE "BatchSize" (
	job_id VARCHAR(400) NOT NULL,
	batch_size INTEGER NOT NULL,
	PRIMARY KEY (job_id, batch_size),
	FOREIGN KEY(job_id) REFERENCES "Job" (job_id) ON DELETE CASCADE
);
CREATE TABLE "GaussianTsArmState" (
	job_id VARCHAR(300) NOT NULL,
	batch_size INTEGER NOT NULL,
	param_mean FLOAT NOT NULL,
	param_precision FLOAT NOT NULL,
	reward_precision FLOAT NOT NULL,
	num_observations INTEGER NOT NULL,
	PRIMARY KEY (job_id, batch_size),
	FOREIGN KEY(job_id, batch_size) REFERENCES "BatchSize" (job_id, batch_size) ON DELETE CASCADE
);
CREATE TABLE "Trial" (
	job_id VARCHAR(300) NOT NULL,
	batch_size INTEGER NOT NULL,
	trial_number INTEGER NOT NULL,
	start_timestamp DATETIME NOT NULL,
	type VARCHAR(11) NOT NULL,
	status VARCHAR(10) NOT NULL,
	end_timestamp DATETIME,
	time FLOAT,
	energy FLOAT,
	converged BOOLEAN,
	PRIMARY KEY (job_id, trial_number),
	FOREIGN KEY(job_id, batch_size) REFERENCES "BatchSize" (job_id, batch_size) ON DELETE CASCADE
);
INSERT INTO "Job" VALUES ('up-1', 'up', 32, 1, 0.5, 2.0, 0.5, 100, 2, 0, 300.0, 1, 'A40', 0.0, 0.0, 2, NULL, NULL, 32, 'Pruning', 300.0, 32);
INSERT INTO "BatchSize" VALUES ('up-1', 16);
INSERT INTO "BatchSize" VALUES ('up-1', 32);
INSERT INTO "BatchSize" VALUES ('up-1', 64);
INSERT INTO "Trial" VALUES ('up-1', 32, 1, '2026-12-01 10:00:00.123456', 'Exploration', 'Succeeded', '2026-12-01 11:00:00.000001', 1.0, 300.0, 1);
INSERT INTO "Trial" VALUES ('up-1', 16, 2, '2026-12-01 12:00:00', 'Exploration', 'Dispatched', NULL, NULL, NULL, NULL);
