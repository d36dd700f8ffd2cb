// Progress of a long command on stderr: on a terminal, one line updated in place (at most every 100 ms);
// otherwise (a log file, CI) a plain line every few seconds, so the output stays readable and small.
export interface Progress {
  /**
   * Shows the line `render` makes (it is given the seconds since the start) when one is due; `now` shows it
   * at once (a new phase, the end).
   */
  update(render: (elapsedSeconds: number) => string, now?: boolean): void;
  /** Writes a line of its own (a warning, a skipped file), after ending the updating line. */
  line(text: string): void;
  /** Ends the updating line; call it before the command writes anything else. */
  end(): void;
}

interface ProgressOptions {
  /** Between two plain lines when the stream is not a terminal (default 5 s). */
  plainIntervalMs?: number;
}

export function createProgress(stream: NodeJS.WriteStream = process.stderr, opts: ProgressOptions = {}): Progress {
  const started = performance.now();
  const tty = stream.isTTY === true;
  const interval = tty ? 100 : (opts.plainIntervalMs ?? 5000);
  let last = -Infinity;
  let shown = false;
  const end = () => {
    if (shown) stream.write("\n");
    shown = false;
  };
  return {
    update(render, now = false) {
      const t = performance.now();
      if (!now && t - last < interval) return;
      last = t;
      const text = render((t - started) / 1000);
      if (tty) {
        // \r and "erase line": the line is rewritten in place, cut to the terminal's width so it never wraps.
        const width = stream.columns ? stream.columns - 1 : 200;
        stream.write(`\r\x1b[2K${text.slice(0, width)}`);
        shown = true;
      } else {
        stream.write(text + "\n");
      }
    },
    line(text) {
      end();
      stream.write(text + "\n");
    },
    end,
  };
}

/** `n` and the noun, plural unless n is 1 ("1 file", "3 files"). */
export function countOf(n: number, noun: string): string {
  return `${n} ${n === 1 ? noun : `${noun}s`}`;
}
