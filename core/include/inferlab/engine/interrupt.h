// SIGINT and SIGTERM during a run: the handler only records which signal came; the runner asks
// between engine steps and while it waits for a cell's child process, finishes the file it is
// writing, marks the run interrupted and returns (the CLI then exits 128 + the signal).
#pragma once

namespace inferlab {

// Installs the recording handler for SIGINT and SIGTERM (idempotent).
void install_interrupt_handlers();
// 0 until SIGINT or SIGTERM arrives after install_interrupt_handlers, then its number.
int interrupt_signal();

}  // namespace inferlab
