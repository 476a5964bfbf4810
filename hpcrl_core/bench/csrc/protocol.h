/* The monitor <-> runner handshake (monitor.c, runner.c): fixed-size messages on two pipes.
 * fd 3 in the runner: the shared matrices (memfd); fd 4: commands from the monitor; fd 5: messages to it.
 * Anything the runner's process writes is untrusted: the monitor checks every message against what it expects. */
#ifndef HPCRL_PROTOCOL_H
#define HPCRL_PROTOCOL_H
#include <stdint.h>

#define HPCRL_SHM_FD 3
#define HPCRL_CMD_FD 4
#define HPCRL_DONE_FD 5

enum { HPCRL_OP_CALL = 1, HPCRL_OP_PING = 2, HPCRL_OP_EXIT = 3 };
enum { HPCRL_MSG_READY = 0x52445921u, HPCRL_MSG_DONE = 0x444f4e45u, HPCRL_MSG_REFUSED = 0x52465344u,
       HPCRL_MSG_SETUP_FAILED = 0x53455446u,
       HPCRL_MSG_ISOLATION = 0x49534f4cu };
enum { HPCRL_EXIT_SETUP = 120, HPCRL_EXIT_REFUSED = 121 };

struct hpcrl_cmd { uint32_t op, m, seq, pad; };
struct hpcrl_msg { uint32_t tag, value; };
#endif
