// The warnings and errors of the instances a test file starts in process, kept in memory and printed only when a
// test fails. A suite run stays quiet, and a failure on a loaded CI box (an UNAVAILABLE answer, a timeout) comes
// with what the instances said about it: the call log names the cause of every UNAVAILABLE, and until this the
// suites logged nothing (`silent`), so such a failure could not be explained afterwards.
import type { DestinationStream } from 'pino';

/** Enough for the last few seconds of a noisy fault; older lines make way. */
const KEEP = 200;
const lines: string[] = [];

/** Where harness.ts sends the in-process instances' log lines (level `warn`) unless TEST_LOG_LEVEL is set. */
export const instanceLogSink: DestinationStream = {
  write(line: string) {
    lines.push(line);
    if (lines.length > KEEP) lines.splice(0, lines.length - KEEP);
  },
};

/** The kept lines, oldest first, and forgets them. */
export function takeInstanceLogs(): string[] {
  return lines.splice(0);
}
