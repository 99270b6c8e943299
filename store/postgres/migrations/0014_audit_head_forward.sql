-- 0014: the audit chain's head only moves forward.
--
-- serve may run as a runtime role that is not the owner of the tables
-- (Store.GrantRuntime): it may INSERT into audit_log but never change or
-- remove a row, and it must UPDATE audit_head, the one row every append
-- moves. These triggers make that UPDATE unable to rewind or forge the
-- head, whoever runs it: the new head must be the last event of the log
-- (its seq and hash), further than the old one. DELETE and TRUNCATE of the
-- head are refused like those of the log. Only the owner of the tables
-- can disable the triggers (ALTER TABLE), and the runtime role is not it.

CREATE FUNCTION audit_head_forward_only() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    last_seq  bigint;
    last_hash text;
BEGIN
    IF TG_OP <> 'UPDATE' THEN
        RAISE EXCEPTION 'audit_head is kept by the audit log: % is refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT seq, hash INTO last_seq, last_hash FROM audit_log ORDER BY seq DESC LIMIT 1;
    IF NEW.id <> OLD.id OR NEW.seq <= OLD.seq OR last_seq IS NULL
       OR NEW.seq <> last_seq OR NEW.hash <> last_hash THEN
        RAISE EXCEPTION 'audit_head only moves forward, to the last event of audit_log'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('head %s -> %s; the log ends at %s', OLD.seq, NEW.seq, coalesce(last_seq::text, 'nothing')),
                  HINT = 'audit events can only be appended; the hash chain detects any change';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER audit_head_forward_only
    BEFORE UPDATE ON audit_head
    FOR EACH ROW EXECUTE FUNCTION audit_head_forward_only();

CREATE TRIGGER audit_head_keep
    BEFORE DELETE OR TRUNCATE ON audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION audit_head_forward_only();
