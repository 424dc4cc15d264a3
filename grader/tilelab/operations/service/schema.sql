-- The service's records, beside procrastinate's queue tables. Every
-- statement may run again: the gateway applies this file at each start.

CREATE TABLE IF NOT EXISTS tilelab_tokens (
    token_hash  text PRIMARY KEY,                  -- sha256 of the token: the token itself is never stored
    role        text NOT NULL CHECK (role IN ('student', 'course', 'staff')),
    student     text,                              -- a student token's student; a course token names its own
    label       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    CHECK ((role = 'student') = (student IS NOT NULL))
);

-- A hand-in's files, once per content (content-addressed), with a checksum
-- of the stored bytes that a worker checks before it grades them.
CREATE TABLE IF NOT EXISTS tilelab_handins (
    digest      text PRIMARY KEY,                  -- sha256 over the files (uploads.HandIn.digest)
    content     bytea NOT NULL,                    -- the files as one canonical zip
    checksum    text NOT NULL,                     -- sha256 of content
    size        integer NOT NULL,
    stored_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS tilelab_submissions (
    id              uuid PRIMARY KEY,
    student         text NOT NULL,
    mode            text NOT NULL CHECK (mode IN ('check', 'grade')),
    handin          text NOT NULL REFERENCES tilelab_handins (digest),
    token_hash      text NOT NULL REFERENCES tilelab_tokens (token_hash),
    idempotency_key text,
    seed            bigint NOT NULL,
    state           text NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled', 'replaced')),
    stage           text NOT NULL DEFAULT '',
    job_id          bigint,                        -- its procrastinate job
    worker          text,
    attempts        integer NOT NULL DEFAULT 0,
    error           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    UNIQUE (token_hash, idempotency_key)
);
CREATE INDEX IF NOT EXISTS tilelab_submissions_queued ON tilelab_submissions (student, mode) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS tilelab_submissions_by_token ON tilelab_submissions (token_hash, created_at);

-- One row per graded submission: its primary key is what makes a hand-in
-- graded exactly once in the records, however often a worker died on it.
CREATE TABLE IF NOT EXISTS tilelab_results (
    submission       uuid PRIMARY KEY REFERENCES tilelab_submissions (id),
    score            double precision NOT NULL,
    max_score        double precision NOT NULL,
    gpu              text,                         -- the GPU's name, or NULL when the GPU stages did not run
    results_json     jsonb NOT NULL,               -- Gradescope's form
    prairielearn     jsonb NOT NULL,               -- PrairieLearn's form
    report_md        text NOT NULL,
    report_html      text NOT NULL,
    plot_png         bytea,
    grade_json       jsonb NOT NULL,
    graded_by        text NOT NULL,
    graded_at        timestamptz NOT NULL DEFAULT now()
);
-- What a student reads of a grading (mode grade) before the staff publish:
-- the report, results.json and prairielearn.json without the answer key's
-- verdicts or the hidden cases (publication.py). NULL for a check.
ALTER TABLE tilelab_results ADD COLUMN IF NOT EXISTS unpublished jsonb;
-- What ran, in a few words, where a score would mislead: a check (public
-- cases only) or a grading without a GPU (built only).
ALTER TABLE tilelab_results ADD COLUMN IF NOT EXISTS outcome text;

CREATE TABLE IF NOT EXISTS tilelab_workers (
    name         text PRIMARY KEY,                 -- host:gpu
    host         text NOT NULL,
    gpu          text NOT NULL,                    -- the CUDA_VISIBLE_DEVICES value it grades on
    gpu_name     text,
    gpu_uuid     text,
    calibration  text,                             -- the fingerprint of its speed basis
    state        text NOT NULL,                    -- starting, ready, unhealthy, stopped
    in_flight    integer NOT NULL DEFAULT 0,
    graded       integer NOT NULL DEFAULT 0,
    failed       integer NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen    timestamptz NOT NULL DEFAULT now()
);

-- Whether the hidden results are published: until a staff member publishes
-- them, a student reads only what Gradescope would show before publication.
CREATE TABLE IF NOT EXISTS tilelab_publication (
    only_row      boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    published_at  timestamptz NOT NULL DEFAULT now(),
    token_hash    text NOT NULL REFERENCES tilelab_tokens (token_hash)
);

-- Why a worker is unhealthy (it takes no jobs), or what a ready one wants the
-- staff to know (too few sandbox users, a slot waiting for leftovers to end).
ALTER TABLE tilelab_workers ADD COLUMN IF NOT EXISTS reason text;
