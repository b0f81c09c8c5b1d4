/* A plugin built with `cachescope cc -shared -fPIC` whose global counters two threads of the
 * host share a line of (tests/record_programs.rs). gcc's constructor of the instrumented
 * library runs blocks inside dlopen. */
volatile long plug_counters[2];

void plug_work(int t)
{
    for (long i = 0; i < 200000; i++)
        plug_counters[t] += i; /* PLUG_WRITE */
}
