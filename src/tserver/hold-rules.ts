/**
 * Holds (meta/holds.ts), as pure functions: what a tablet does with its share in a sibling's reservation
 * once that reservation has ended. hold-resolver.ts reads the evidence and applies the change.
 *
 * 1. Committed. The reservation's outcome row (`~done:<ecid>`, written by the commit itself) says it
 *    committed: the output takes the place of the held inputs here, as the commit did in the sibling —
 *    when every held input is still here (nothing else could take them: they are held) and the output
 *    covers every row of this tablet (it was reserved for rows that did). The inputs are marked for the
 *    collector, which deletes a file only once no tablet references it. The tablet's clock moves up to the
 *    job's time; failure records about the inputs are moot. A user job satisfies this tablet's copies of
 *    its requests and ends its selection — unless an admin cancelled them all here meanwhile: a cancelled
 *    rewrite is never installed, so the hold is only let go. A system job's output takes its inputs'
 *    place in a selection made after the split.
 * 2. Ended otherwise. Cancelled, or neither an outcome nor the reservation is there any more (the outcome
 *    was trimmed long after): the hold is let go, and the inputs are this tablet's to compact again. Letting
 *    go is always safe: the inputs still hold the data.
 * 3. Running. The reservation is still there: nothing changes.
 */
import { shareFigures, statsFields } from '../meta/file-stats.js';
import { delRow } from '../meta/keys.js';
import { holdCol, type Hold } from '../meta/holds.js';
import type { Outcome } from '../meta/outcomes.js';
import { coversRows } from '../meta/rows.js';
import {
  COL_SELECTED,
  COL_TIME,
  compactCol,
  failedCol,
  fileCol,
  rowsOf,
  type TabletMeta,
} from '../meta/tablet.js';
import type { Cell } from '../meta/types.js';
import type { RuleChange } from './rule-change.js';
import { filesPresent } from './rule-change.js';

/** What the tablet server found out about a held reservation. */
export interface HoldEvidence {
  /** Its outcome row, if there is one. */
  outcome?: Outcome;
  /** Whether its `ecomp:` column is still in the row of the tablet that holds it. */
  reserved: boolean;
}

export type HoldDecision =
  | { kind: 'wait' }
  | { kind: 'install'; change: RuleChange }
  | { kind: 'release'; change: RuleChange; why: string };

export function decideHold(
  meta: TabletMeta,
  ecid: string,
  hold: Hold,
  evidence: HoldEvidence,
  now: number,
): HoldDecision {
  const { row } = meta;
  const held = { op: 'present' as const, row, col: holdCol(ecid) };
  const release = (why: string): HoldDecision => ({
    kind: 'release',
    why,
    change: {
      conditions: [held],
      puts: [],
      deletes: [{ row, col: holdCol(ecid) }],
      apply: (m) => {
        m.holds.delete(ecid);
      },
    },
  });
  const { outcome } = evidence;
  if (!outcome) return evidence.reserved ? { kind: 'wait' } : release('its reservation is gone');
  if (outcome.outcome !== 'committed') return release(`its reservation was ${outcome.outcome}`);
  if (!hold.inputs.every((f) => meta.files.has(f))) return release('its inputs are not all here');
  if (!coversRows(hold.clip, rowsOf(meta))) return release("its output does not cover the tablet's rows");
  const requests =
    hold.kind === 'user' ? (hold.userCompactionIds ?? []).filter((id) => meta.userCompactions.has(id)) : [];
  if (hold.kind === 'user' && requests.length === 0)
    return release('its user compactions were cancelled here');

  // The output, if anything survived: its share here estimated like the inputs' (a commit with an output
  // always wrote at least one entry).
  const entries = outcome.entries ?? 0;
  const output =
    entries > 0
      ? {
          name: hold.output,
          file: shareFigures(
            { size: outcome.outputBytes ?? 0, entries, ...statsFields(outcome) },
            hold.share,
            true,
          ),
        }
      : undefined;
  const inputs = new Set(hold.inputs);
  const moot = [...meta.failures].filter(([, f]) => f.inputs.some((i) => inputs.has(i))).map(([k]) => k);
  const selection = meta.selection;
  let nextSelection: TabletMeta['selection'] | null | undefined;
  if (hold.kind === 'user')
    nextSelection = selection && requests.some((id) => selection.ids.includes(id)) ? null : undefined;
  else if (selection && hold.inputs.every((f) => selection.files.includes(f))) {
    const files = selection.files.filter((f) => !inputs.has(f));
    if (output) files.push(output.name);
    nextSelection = { ...selection, files: files.sort() };
  }
  const puts: Cell[] = [
    ...(output ? [{ row, col: fileCol(output.name), value: JSON.stringify(output.file) }] : []),
    ...hold.inputs.map((f) => ({ row: delRow(f), col: 'at', value: String(now) })),
    ...(hold.nowMs > meta.time ? [{ row, col: COL_TIME, value: String(hold.nowMs) }] : []),
    ...(nextSelection ? [{ row, col: COL_SELECTED, value: JSON.stringify(nextSelection) }] : []),
  ];
  return {
    kind: 'install',
    change: {
      conditions: [
        held,
        ...filesPresent(row, hold.inputs),
        ...requests.map((id) => ({ op: 'present' as const, row, col: compactCol(id) })),
      ],
      puts,
      deletes: [
        { row, col: holdCol(ecid) },
        ...hold.inputs.map((f) => ({ row, col: fileCol(f) })),
        ...moot.map((k) => ({ row, col: failedCol(k) })),
        ...requests.map((id) => ({ row, col: compactCol(id) })),
        ...(nextSelection === null ? [{ row, col: COL_SELECTED }] : []),
      ],
      apply: (m) => {
        m.holds.delete(ecid);
        for (const f of hold.inputs) m.files.delete(f);
        if (output) m.files.set(output.name, output.file);
        for (const k of moot) m.failures.delete(k);
        for (const id of requests) m.userCompactions.delete(id);
        m.time = Math.max(m.time, hold.nowMs);
        if (nextSelection === null) delete m.selection;
        else if (nextSelection) m.selection = nextSelection;
      },
    },
  };
}
