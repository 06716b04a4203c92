/**
 * Which files the garbage collector (gc.ts) deletes: what a tablet references, and the decision made from
 * every reference (kept by the index of gc-index.ts).
 *
 * A file may be deleted only when no tablet references it: not as one of its files, nor as an input or the
 * output of one of its reservations, nor as a part of a checkpoint (one a reservation holds, or one kept
 * for a requeued job: DESIGN.md, "Resume").
 *
 * The index is built from one snapshot of the metadata store (followed-index.ts). Read page by page, a
 * commit landing between two pages could hide a file it moves within a tablet's row from a column read
 * later to one read earlier (the last sub-job of a split moves the sub-jobs' outputs from `split:` to
 * `file:`; a resuming reservation a checkpoint from `resume:` to `ecomp:`), and the sweep would delete it.
 *
 * An output a reservation is still writing may sit in the store unnamed for a long time: its parts
 * (`<output>.partial`, `<output>.partNNNNN`) before the first checkpoint names them, and the local
 * store's temporary file of a write that has produced little yet. Both are kept while the reservation
 * lives, however old.
 *
 * The decision is a pure function ({@link planGc}) so it can be checked against random histories.
 */
import { checkpointParts, type TabletMeta } from '../meta/tablet.js';
import { ofOutputBeingWritten } from '../storage/index.js';

/** A set of file names, as the plan asks it (a Set, or the index's counts). */
export interface NameSet {
  has(name: string): boolean;
}

export interface GcInput {
  now: number;
  graceMs: number;
  /** Files some tablet references (files, reservation inputs and outputs). */
  referenced: NameSet;
  /** Outputs reservations are writing: their parts are kept, named in a checkpoint or not. */
  writing?: NameSet;
  /** `~del` rows: file → time the row was written. */
  deletions: ReadonlyMap<string, number>;
  /** Objects found under the tables prefix: name → last modified. Undefined when the sweep is skipped. */
  objects?: ReadonlyMap<string, number>;
}

export interface GcPlan {
  /** Files to delete from the store. */
  deleteFiles: string[];
  /** `~del` rows to remove after their files are deleted. */
  dropRows: string[];
  /** `~del` rows naming a referenced file (left alone, reported). */
  stillReferenced: string[];
}

export function planGc(input: GcInput): GcPlan {
  const deleteFiles = new Set<string>();
  const dropRows: string[] = [];
  const stillReferenced: string[] = [];
  for (const [file, at] of input.deletions) {
    if (input.referenced.has(file)) {
      stillReferenced.push(file);
      continue;
    }
    if (input.now - at < input.graceMs) continue;
    deleteFiles.add(file);
    dropRows.push(file);
  }
  for (const [name, modifiedMs] of input.objects ?? []) {
    if (input.referenced.has(name) || input.deletions.has(name)) continue;
    if (input.writing && ofOutputBeingWritten(name, input.writing)) continue;
    if (input.now - modifiedMs < input.graceMs) continue;
    deleteFiles.add(name);
  }
  return { deleteFiles: [...deleteFiles], dropRows, stillReferenced };
}

/**
 * What a tablet references — its files, its reservations' inputs and outputs, the parts of its
 * checkpoints, held outputs and finished sub-jobs' outputs — and the outputs its reservations are
 * writing. The one reading of references: the index (gc-index.ts) reads each cell with it, as the tests' full reads do.
 */
export function tabletReferences(
  tablet: TabletMeta,
  to: { referenced: (file: string) => void; writing: (output: string) => void },
): void {
  for (const file of tablet.files.keys()) to.referenced(file);
  for (const r of tablet.reservations.values()) {
    to.referenced(r.output);
    to.writing(r.output);
    for (const input of r.inputs) to.referenced(input);
  }
  for (const part of checkpointParts(tablet)) to.referenced(part);
}
