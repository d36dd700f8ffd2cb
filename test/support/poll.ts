// Waiting for something a server does on its own (a health status following the database, a notification
// reaching a replica): poll until it holds, or fail with the last value seen once `deadlineMs` has passed.
export async function until<T>(what: string, get: () => Promise<T>, holds: (value: T) => boolean, deadlineMs: number): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const value = await get();
    if (holds(value)) return value;
    if (Date.now() > end) throw new Error(`${what}: still ${JSON.stringify(value)} after ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The promise's value, or a rejection naming `what` when it does not settle within `ms` (a hang). */
export async function within<T>(what: string, ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
