-- A run belongs to the server process that runs it: `owner` names the process, and the run is
-- its own while `lease_until` (seconds since the epoch) is ahead; a process renews the leases of
-- its runs, and a run whose lease ran out is taken over as interrupted. One running run a chat.
ALTER TABLE runs ADD COLUMN owner TEXT;
ALTER TABLE runs ADD COLUMN lease_until BIGINT;
CREATE UNIQUE INDEX runs_one_running ON runs(chat_id) WHERE status = 'running';
