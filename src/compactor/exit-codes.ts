/**
 * The compactor's own exit code, apart from the process so the command line can name it in --help without
 * loading the compactor.
 */

/** The queue was deleted: the compactor's work is gone for good (not a crash; no restart will help). */
export const EXIT_QUEUE_DELETED = 4;
/** Its jobs kept failing (EXC_COMPACTOR_EXIT_AFTER in a row): the compactor is sick, replace it (health.ts). */
export const EXIT_SICK = 5;
