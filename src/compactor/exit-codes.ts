/**
 * The compactor's own exit code, apart from the process so the command line can name it in --help without
 * loading the compactor.
 */

/** The queue was deleted: the compactor's work is gone for good (not a crash; no restart will help). */
export const EXIT_QUEUE_DELETED = 4;
