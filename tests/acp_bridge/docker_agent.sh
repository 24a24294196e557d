#!/bin/bash
# A small ACP agent in plain bash, for the test image of tests/acp_bridge/test_docker.py: the
# busybox image has no Python for the SDK's agent side, so this speaks newline-delimited
# JSON-RPC itself (the SDK writes compact JSON, one message a line, non-ASCII escaped).
#
# The prompt's text is a command:
#   full      thought and message chunks; a read tool call served by fs/read_text_file
#             (in.txt, and /etc/passwd, which must be refused); an edit tool call that asks
#             session/request_permission and on "allow" writes out.txt with fs/write_text_file;
#             an execute tool call running a terminal (terminal/create, wait_for_exit, output,
#             release); then one message reporting what it saw, a line per item
#   env       the sorted names of the environment it was started with, one message
#   crash     a line on stderr naming $TOKEN, then exit 3
#   garbage   a line on stdout that is not JSON
#   big N     one message chunk of N characters
#   hang      a child `sleep` in its group, then never answers
set -u

SESSION=sess-docker
NEXT_ID=100
STRING='(([^"\\]|\\.)*)'

send() { printf '%s\n' "$1"; }

reply() { send "{\"jsonrpc\":\"2.0\",\"id\":$1,\"result\":$2}"; }

update() {
  send "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"$SESSION\",\"update\":$1}}"
}

say() { update "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"$1\"}}"; }

think() { update "{\"sessionUpdate\":\"agent_thought_chunk\",\"content\":{\"type\":\"text\",\"text\":\"$1\"}}"; }

# call METHOD PARAMS: a request to the client; its answer's line ends up in $ANSWER (other
# messages meanwhile, such as session/cancel, are not for this simple agent).
call() {
  local id=$NEXT_ID
  NEXT_ID=$((NEXT_ID + 1))
  send "{\"jsonrpc\":\"2.0\",\"id\":$id,\"method\":\"$1\",\"params\":$2}"
  while IFS= read -r ANSWER; do
    [[ $ANSWER =~ \"id\":$id[,}] ]] && return 0
  done
  exit 0 # stdin closed: the client went away
}

field() { # field NAME: the JSON string value of NAME in $ANSWER (still escaped)
  local re="\"$1\":\"$STRING\""
  [[ $ANSWER =~ $re ]] && printf '%s' "${BASH_REMATCH[1]}"
}

number() { # number NAME: the JSON number (or null) of NAME in $ANSWER
  local re="\"$1\":(-?[0-9]+|null)"
  [[ $ANSWER =~ $re ]] && printf '%s' "${BASH_REMATCH[1]}"
}

tool_call() { # tool_call ID TITLE KIND
  update "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"$1\",\"title\":\"$2\",\"kind\":\"$3\",\"status\":\"in_progress\"}"
}

tool_done() { # tool_done ID STATUS CONTENT-JSON
  update "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"$1\",\"status\":\"$2\",\"content\":$3}"
}

full() {
  think "looking around the container"
  say "hello "
  say "from the container"

  tool_call read-1 "Read in.txt" read
  call fs/read_text_file "{\"sessionId\":\"$SESSION\",\"path\":\"/workspace/in.txt\"}"
  local content
  content=$(field content)
  tool_done read-1 completed "[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"$content\"}}]"
  call fs/read_text_file "{\"sessionId\":\"$SESSION\",\"path\":\"/etc/passwd\"}"
  local outside=read
  [[ $ANSWER == *'"error"'* ]] && outside=refused

  tool_call edit-1 "Edit out.txt" edit
  call session/request_permission "{\"sessionId\":\"$SESSION\",\"toolCall\":{\"toolCallId\":\"edit-1\",\"title\":\"Edit out.txt\",\"kind\":\"edit\"},\"options\":[{\"optionId\":\"allow\",\"name\":\"Allow\",\"kind\":\"allow_once\"},{\"optionId\":\"reject\",\"name\":\"Reject\",\"kind\":\"reject_once\"}]}"
  local chosen
  chosen=$(field optionId)
  if [[ $chosen == allow ]]; then
    call fs/write_text_file "{\"sessionId\":\"$SESSION\",\"path\":\"/workspace/sub/out.txt\",\"content\":\"written in the container\\n\"}"
    tool_done edit-1 completed "[{\"type\":\"diff\",\"path\":\"/workspace/sub/out.txt\",\"oldText\":null,\"newText\":\"written in the container\\n\"}]"
  else
    tool_done edit-1 failed "[]"
  fi

  tool_call run-1 "Run the terminal" execute
  call terminal/create "{\"sessionId\":\"$SESSION\",\"command\":\"sh\",\"args\":[\"-c\",\"echo from-terminal; pwd; cat in.txt; echo \$TERM_VAR\"],\"env\":[{\"name\":\"TERM_VAR\",\"value\":\"set-by-agent\"}],\"cwd\":\"/workspace\"}"
  local terminal
  terminal=$(field terminalId)
  update "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"run-1\",\"content\":[{\"type\":\"terminal\",\"terminalId\":\"$terminal\"}]}"
  call terminal/wait_for_exit "{\"sessionId\":\"$SESSION\",\"terminalId\":\"$terminal\"}"
  local code
  code=$(number exitCode)
  call terminal/output "{\"sessionId\":\"$SESSION\",\"terminalId\":\"$terminal\"}"
  local output
  output=$(field output)
  tool_done run-1 completed "[{\"type\":\"terminal\",\"terminalId\":\"$terminal\"}]"
  call terminal/release "{\"sessionId\":\"$SESSION\",\"terminalId\":\"$terminal\"}"

  say "read=$content\\noutside=$outside\\npermission=$chosen\\nexit=$code\\nterminal=$output"
}

prompt() { # prompt ID: run the command in the prompt's text, then answer the prompt
  local re="\"text\":\"$STRING\""
  local text=""
  [[ $LINE =~ $re ]] && text=${BASH_REMATCH[1]}
  case $text in
    full) full ;;
    env) say "$(tr '\0' '\n' < /proc/$$/environ | cut -d= -f1 | sort | tr '\n' ' ')" ;;
    crash)
      echo "docker agent: about to crash, token=${TOKEN:-none}" >&2
      exit 3
      ;;
    garbage) send "this is not json" ;;
    big\ *) say "$(printf '%*s' "${text#big }" '' | tr ' ' x)" ;;
    hang)
      sleep 600 &
      while :; do sleep 600; done
      ;;
    *) say "unknown command: $text" ;;
  esac
  reply "$1" '{"stopReason":"end_turn"}'
}

while IFS= read -r LINE; do
  id=""
  [[ $LINE =~ ^\{\"jsonrpc\":\"2.0\",\"id\":([0-9]+), ]] && id=${BASH_REMATCH[1]}
  method=""
  [[ $LINE =~ \"method\":\"([^\"]*)\" ]] && method=${BASH_REMATCH[1]}
  [[ -z $id ]] && continue # a notification (session/cancel): nothing to do here
  case $method in
    initialize) reply "$id" '{"protocolVersion":1,"agentCapabilities":{"loadSession":false}}' ;;
    session/new) reply "$id" "{\"sessionId\":\"$SESSION\"}" ;;
    session/prompt) prompt "$id" ;;
    *) send "{\"jsonrpc\":\"2.0\",\"id\":$id,\"error\":{\"code\":-32601,\"message\":\"method not found\"}}" ;;
  esac
done
