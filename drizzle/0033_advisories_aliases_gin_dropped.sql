-- No statement searches advisories.aliases any more (alias and cve lookups read advisory_aliases by its primary
-- key, migration advisory_aliases_triggers): its GIN index only cost every write of an advisory.
DROP INDEX "advisories_aliases_idx";
