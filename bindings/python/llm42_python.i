/* Python: module llm42. Built with -threads, so the GIL is released during every call into
 * llm42 (waits included). Strings are str (UTF-8), token lists list[int]. */
%module llm42

/* Installed from a wheel, libllm42 sits in llm42.libs/ beside this module: load it before the
 * extension, which then finds it by its soname. */
%pythonbegin %{
import ctypes as _ctypes
import os as _os
_llm42_libs = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "llm42.libs")
if _os.path.isdir(_llm42_libs):
    for _name in sorted(_os.listdir(_llm42_libs)):
        _ctypes.CDLL(_os.path.join(_llm42_libs, _name), mode=_ctypes.RTLD_GLOBAL)
%}

%{
#include <Python.h>
static PyObject* llm42_py_exception = nullptr;  // llm42.Llm42Exception, set at import

// llm42_py_exception(status, message) makes the exception (llm42.Llm42Exception or the subclass
// for the status, which also subclasses the matching built-in); this raises it.
static void llm42_py_raise(int status, const char* message) {
  if (llm42_py_exception == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, message);
    return;
  }
  PyObject* e = PyObject_CallFunction(llm42_py_exception, "is", status, message);
  if (e == nullptr) return;  // the factory's own error is set
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(e)), e);
  Py_DECREF(e);
}
#define LLM42_SWIG_RAISE(status, message) llm42_py_raise(status, message)
%}
#define LLM42_SWIG_ON_ERROR SWIG_fail;

%inline %{
void _set_exception_class(PyObject* cls) {
  Py_XINCREF(cls);
  llm42_py_exception = cls;
}
%}

%include <stdint.i>
%include <std_string.i>
%include <std_vector.i>
%template(_IntVector) std::vector<int32_t>;

/* Token lists come back as list[int]. */
%typemap(out) std::vector<int32_t> {
  const std::vector<int32_t>& v = $1;
  $result = PyList_New(static_cast<Py_ssize_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) PyList_SET_ITEM($result, static_cast<Py_ssize_t>(i), PyLong_FromLong(v[i]));
}

/* Streamed text: str, or None at the end of the stream. */
%typemap(out) llm42_swig::Text {
  if ($1.done) {
    Py_INCREF(Py_None);
    $result = Py_None;
  } else {
    $result = PyUnicode_DecodeUTF8($1.text.data(), static_cast<Py_ssize_t>($1.text.size()), "replace");
  }
}

/* Streamed token ids: list[int], or None at the end of the stream. */
%typemap(out) llm42_swig::Tokens {
  if ($1.done) {
    Py_INCREF(Py_None);
    $result = Py_None;
  } else {
    $result = PyList_New(static_cast<Py_ssize_t>($1.ids.size()));
    for (size_t i = 0; i < $1.ids.size(); ++i) PyList_SET_ITEM($result, static_cast<Py_ssize_t>(i), PyLong_FromLong($1.ids[i]));
  }
}

/* Logprobs come back as list[float]. */
%typemap(out) std::vector<float> {
  const std::vector<float>& v = $1;
  $result = PyList_New(static_cast<Py_ssize_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) PyList_SET_ITEM($result, static_cast<Py_ssize_t>(i), PyFloat_FromDouble(v[i]));
}

/* Binary data (receipts): bytes both ways. */
%typemap(out) llm42_swig::Bytes {
  $result = PyBytes_FromStringAndSize($1.data.data(), static_cast<Py_ssize_t>($1.data.size()));
}
%typemap(in) const llm42_swig::Bytes& (llm42_swig::Bytes temp) {
  char* p = nullptr;
  Py_ssize_t n = 0;
  if (!PyBytes_Check($input) || PyBytes_AsStringAndSize($input, &p, &n) != 0) {
    SWIG_exception_fail(SWIG_TypeError, "expected bytes");
  }
  temp.data.assign(p, static_cast<size_t>(n));
  $1 = &temp;
}
%typemap(typecheck, precedence=SWIG_TYPECHECK_STRING) const llm42_swig::Bytes& { $1 = PyBytes_Check($input) ? 1 : 0; }

/* ReceiptCheck holds no handle: Python frees it with its last reference. */
%ignore llm42_swig_receipt_check::close;
%include "../swig/llm42.i"

%pythoncode %{
import enum as _enum


class Llm42Exception(Exception):
    """An llm42 call failed: `status` is the Status, str(e) the message."""

    def __init__(self, status, message):
        super().__init__(message)
        try:
            self.status = Status(status)
        except ValueError:  # a code newer than these bindings: kept as the int
            self.status = status

    def __str__(self):
        name = self.status.name if isinstance(self.status, Status) else "status %d" % self.status
        return "%s: %s" % (name, self.args[0])


class InvalidArgumentError(Llm42Exception, ValueError):
    """INVALID_ARGUMENT: also a ValueError."""


class OutOfRangeError(Llm42Exception, ValueError):
    """OUT_OF_RANGE (a value outside its documented range): also a ValueError."""


class NotFoundError(Llm42Exception, FileNotFoundError):
    """NOT_FOUND: also a FileNotFoundError."""


class TimeoutError_(Llm42Exception, TimeoutError):
    """TIMEOUT: also the built-in TimeoutError."""


class ResourceExhaustedError(Llm42Exception, MemoryError):
    """RESOURCE_EXHAUSTED: also a MemoryError."""


class CancelledError(Llm42Exception):
    """CANCELLED: the request was cancelled (raised at the end of its stream, by generate, and by
    the async forms once the request they await is cancelled)."""


_EXCEPTION_CLASSES = {LLM42_INVALID_ARGUMENT: InvalidArgumentError, LLM42_OUT_OF_RANGE: OutOfRangeError,
                      LLM42_NOT_FOUND: NotFoundError,
                      LLM42_TIMEOUT: TimeoutError_, LLM42_RESOURCE_EXHAUSTED: ResourceExhaustedError,
                      LLM42_CANCELLED: CancelledError}


def _exception_for(status, message):
    return _EXCEPTION_CLASSES.get(status, Llm42Exception)(status, message)


_set_exception_class(_exception_for)

if version_problem():
    raise ImportError(version_problem())


def _enum_from(prefix, name):
    return _enum.IntEnum(name, {k[len(prefix):]: v for k, v in globals().items()
                                if k.startswith(prefix) and not k.endswith("FORCE_INT32_")})


Status = _enum.IntEnum("Status", {k[len("LLM42_"):]: v for k, v in globals().items()
                                  if k.startswith("LLM42_") and isinstance(v, int)
                                  and not k.startswith(("LLM42_MODE_", "LLM42_STAT_", "LLM42_LOG_",
                                                        "LLM42_VERSION", "LLM42_DECODE_PATH_",
                                                        "LLM42_RECEIPT_"))})
Mode = _enum_from("LLM42_MODE_", "Mode")
Stat = _enum_from("LLM42_STAT_", "Stat")
FinishReason = _enum_from("FinishReason_", "FinishReason")
ReceiptOutcome = _enum_from("LLM42_RECEIPT_", "ReceiptOutcome")
DecodePath = _enum_from("LLM42_DECODE_PATH_", "DecodePath")
ReceiptCheck.outcome = (lambda method: lambda self: ReceiptOutcome(method(self)))(ReceiptCheck.outcome)


def _context_manager(cls):
    cls.__enter__ = lambda self: self
    cls.__exit__ = lambda self, *exc: self.close()
    return cls


for _cls in (Determinism, SessionOptions, Session, RequestOptions, Request, Watcher, SessionLoader):
    _context_manager(_cls)


def _iter_text(self):
    """Yields text chunks as they are committed, until the request finishes."""
    while True:
        chunk = self.read_text(-1)
        if chunk is None:
            return
        yield chunk


Request.__iter__ = _iter_text


class _Dispatcher:
    """Serves every async stream of a session from one thread, which runs while any stream is
    open: it waits on a Watcher for the
    requests with news and runs their streams' readers, which read without waiting and hand the
    results to the event loop awaiting them (call_soon_threadsafe). So 64 concurrent `async for`
    loops cost one thread, not 64 executor threads, and no llm42 thread ever runs Python code."""

    def __init__(self):
        import threading
        self._watcher = Watcher()
        self._lock = threading.Lock()
        self._tags = {}      # id(request) -> tag
        self._streams = {}   # tag -> (request, {stream id: reader})
        self._next_tag = 0
        self._running = False  # a thread serves the streams; it ends when the last one has ended

    def open(self, request, reader):
        """Runs reader() on the dispatcher thread at each news of `request` (at once when it has
        some already) until it returns True; returns the stream's key for close()."""
        key = object()
        with self._lock:
            tag = self._tags.get(id(request))
            if tag is None:
                tag = self._tags[id(request)] = self._next_tag
                self._next_tag = (self._next_tag + 1) & 0x7FFFFFFF
                self._streams[tag] = (request, {})
            self._streams[tag][1][key] = reader
            if not self._running:
                import threading
                self._running = True
                threading.Thread(target=self._run, name="llm42-dispatcher", daemon=True).start()
        try:
            self._watcher.add(request, tag)
        except BaseException:  # the request was closed meanwhile
            self.close(request, key)
            raise
        return key

    def close(self, request, key):
        with self._lock:
            tag = self._tags.get(id(request))
            if tag is None:
                return
            readers = self._streams[tag][1]
            readers.pop(key, None)
            if readers:
                return
            del self._streams[tag], self._tags[id(request)]
        try:
            self._watcher.remove(request)
        except Llm42Exception:
            pass  # the request was closed: it reports to nobody now

    def _run(self):
        while True:
            try:
                tags = self._watcher.wait(-1)
            except Llm42Exception:  # the watcher is gone
                return
            for tag in tags:
                with self._lock:
                    request, readers = self._streams.get(tag, (None, {}))
                    readers = list(readers.items())
                for key, reader in readers:
                    try:
                        ended = reader()
                    except Exception:  # a reader's failure ends its own stream only
                        ended = True
                    if ended:
                        self.close(request, key)
            with self._lock:
                if not self._streams:
                    self._running = False
                    return


class _Served:
    """An async stream of a request, open on its session's dispatcher: ended is set once its
    reader has run to the end, which Request.close() waits for."""

    def __init__(self, request, reader):
        import threading
        session = getattr(request, "_session", None)
        if session is None:
            raise Llm42Exception(LLM42_FAILED_PRECONDITION, "this request's session is unknown")
        self.request, self.ended = request, threading.Event()

        def run():
            done = True
            try:
                done = reader()
            finally:
                if done:
                    self.ended.set()
            return done
        with _DISPATCHER_LOCK:
            self.dispatcher = getattr(session, "_llm42_dispatcher", None)
            if self.dispatcher is None:
                self.dispatcher = session._llm42_dispatcher = _Dispatcher()
            request.__dict__.setdefault("_llm42_streams", set()).add(self)
        try:
            self.key = self.dispatcher.open(request, run)
        except BaseException:
            self.ended.set()
            self._forget()
            raise

    def close(self):
        self.dispatcher.close(self.request, self.key)
        self.ended.set()
        self._forget()

    def _forget(self):
        with _DISPATCHER_LOCK:
            self.request.__dict__.get("_llm42_streams", set()).discard(self)


def _deliver(loop, queue, item):
    """Hands item to the coroutine awaiting `queue` on `loop`; False when that loop is gone."""
    try:
        loop.call_soon_threadsafe(queue.put_nowait, item)
        return True
    except RuntimeError:  # the loop is closed: nobody awaits this stream any more
        return False


async def _aiter_text(self):
    """`async for`: chunks arrive from the session's dispatcher thread (one for all its streams),
    so the loop keeps running and no thread waits per stream. Cancelling the task that iterates
    cancels the request; a request that ends cancelled or failed raises CancelledError /
    Llm42Exception."""
    import asyncio
    loop, queue = asyncio.get_running_loop(), asyncio.Queue()

    def reader():  # on the dispatcher thread: True once the stream ended
        try:
            while True:
                chunk = self.read_text(0)
                if chunk == "":
                    return False  # nothing more yet: its next commit is news again
                if not _deliver(loop, queue, (chunk, None)) or chunk is None:
                    return True
        except Exception as e:  # the end of a failed or cancelled request, or a closed one
            _deliver(loop, queue, (None, e))
            return True

    served = _Served(self, reader)
    try:
        while True:
            chunk, error = await queue.get()
            if error is not None:
                raise error
            if chunk is None:
                return
            yield chunk
    except (asyncio.CancelledError, GeneratorExit):
        self.cancel()
        raise
    finally:
        served.close()


async def _completion(self):
    """Awaits the end of the request (the session's dispatcher thread watches for it: no thread
    waits per request) and returns it; raises CancelledError or the Llm42Exception for the status
    it ended with. Cancelling the awaiting task cancels the request. The text stays readable
    (output_text(), or the stream)."""
    import asyncio
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(error):
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(self)

    def reader():
        if not self.is_finished():
            return False
        try:
            self.check_status()
            error = None
        except Exception as e:
            error = e
        try:
            loop.call_soon_threadsafe(settle, error)
        except RuntimeError:
            pass  # the loop is closed
        return True

    served = _Served(self, reader)
    try:
        return await future
    except asyncio.CancelledError:
        if not future.done() or future.cancelled():
            self.cancel()
        raise
    finally:
        served.close()


Request.__aiter__ = _aiter_text
Request.completion = _completion
_Session_submit = Session.submit


def _submit(self, options):
    request = _Session_submit(self, options)
    request._session = self  # its async forms use this session's dispatcher
    return request


_Request_close = Request.close


def _close_request(self):
    """Cancels and frees the request; its async streams (served by the dispatcher) first see the
    cancelled end, so none of them waits on a request that is gone."""
    with _DISPATCHER_LOCK:
        streams = list(self.__dict__.get("_llm42_streams", ()))
    if streams:
        self.cancel()
        for served in streams:
            served.ended.wait()
    _Request_close(self)


Session.submit = _submit


async def open_session_async(options, progress=None, poll_seconds=0.02):
    """Creates a session without blocking the event loop: llm42 loads it on a thread of its own
    and this coroutine polls it (SessionLoader), calling progress(fraction) on the loop's thread
    as the load advances (0..1, ending with 1.0). Cancelling the awaiting task cancels the load."""
    import asyncio
    with SessionLoader(options) as loader:
        last = -1.0
        try:
            # One yield to the loop first: a task cancelled as soon as it starts is cancelled here,
            # even when the load has finished by the time it is first polled (a small model).
            await asyncio.sleep(0)
            while not loader.wait_for(0):
                fraction = loader.progress()
                if progress is not None and fraction > last:
                    progress(fraction)
                    last = fraction
                await asyncio.sleep(poll_seconds)
        except asyncio.CancelledError:
            loader.cancel()
            raise
        session = loader.take()
        if progress is not None:
            progress(1.0)
        return session
Request.close = _close_request
_DISPATCHER_LOCK = __import__("threading").Lock()


def log_messages():
    """Removes and yields the captured log messages (capture_log(True)) as (level, text), oldest
    first; LLM42_LOG_DEBUG..LLM42_LOG_ERROR map to logging.DEBUG..ERROR by (level + 1) * 10."""
    while True:
        level = log_message_level()
        if level < 0:
            return
        yield level, take_log_message()
_RequestOptions_set_json_schema = RequestOptions.set_json_schema


def _set_json_schema(self, schema):
    """Constrains the output to JSON valid under `schema`: JSON text, or a dict (serialized with
    json.dumps, keys in the dict's order, which is the order properties are generated in)."""
    if isinstance(schema, dict):
        import json
        schema = json.dumps(schema)
    _RequestOptions_set_json_schema(self, schema)


RequestOptions.set_json_schema = _set_json_schema
_RequestOptions_set_tools = RequestOptions.set_tools


def _set_tools(self, session, tools, tool_choice="auto", parallel_calls=True):
    """Lets the request call `tools` (a list of OpenAI tool dicts, or their JSON text) as
    `tool_choice` lets it ("auto", "required", "none", a tool's name, or OpenAI's dict), in the
    session's model's tool-call syntax (llm42_request_options_set_tools); read the calls back with
    session.parse_chat_output."""
    import json
    if not isinstance(tools, str):
        tools = json.dumps(tools, ensure_ascii=False)
    if isinstance(tool_choice, dict):
        tool_choice = json.dumps(tool_choice)
    _RequestOptions_set_tools(self, session, tools, tool_choice, bool(parallel_calls))


RequestOptions.set_tools = _set_tools
_Session_generate = Session.generate


def _options_from(prompt, settings):
    """RequestOptions from a prompt (str: text; list: token ids) and keyword settings: each
    name is a RequestOptions setter without its set_ (max_tokens=32, seed=7, json_schema={...});
    messages=[(role, content), ...] and stop=[...] add each; a tuple calls a setter of several
    arguments (repetition_penalty=(1.1, 64))."""
    ro = RequestOptions()
    try:
        if isinstance(prompt, str):
            ro.set_prompt(prompt)
        elif prompt is not None:
            ro.set_prompt_tokens(list(prompt))
        for name, value in settings.items():
            if name == "messages":
                for role, content in value:
                    ro.add_message(role, content)
            elif name == "stop":
                for text in ([value] if isinstance(value, str) else value):
                    ro.add_stop(text)
            else:
                setter = getattr(ro, "set_" + name, None)
                if setter is None:
                    raise TypeError("generate() got an unknown option %r" % name)
                setter(*value) if isinstance(value, tuple) else setter(value)
    except BaseException:
        ro.close()
        raise
    return ro


def _generate(self, prompt=None, options=None, **settings):
    """One completion in one call: session.generate("Once upon a time", max_tokens=32,
    deterministic=True) -> str (options as keywords, see _options_from), or
    session.generate(options=RequestOptions). Raises as the stream would: CancelledError, or the
    Llm42Exception for the status the request ended with."""
    if options is not None:
        if prompt is not None or settings:
            raise TypeError("generate() takes either options= or a prompt and keyword options")
        return _Session_generate(self, options)
    with _options_from(prompt, settings) as ro:
        return _Session_generate(self, ro)


Session.generate = _generate
_Session_apply_chat_template = Session.apply_chat_template


def _apply_chat_template(self, messages, options=None):
    """Renders a conversation with the model's chat template (llm42_session_apply_chat_template):
    `messages` a list of OpenAI-form message dicts (or their JSON text), `options` a dict of
    tools, add_generation_prompt, template and kwargs (or its JSON text), None for none."""
    import json
    if not isinstance(messages, str):
        messages = json.dumps(messages, ensure_ascii=False)
    if options is None:
        options = ""
    elif not isinstance(options, str):
        options = json.dumps(options, ensure_ascii=False)
    return _Session_apply_chat_template(self, messages, options)


Session.apply_chat_template = _apply_chat_template
_Session_parse_chat_output = Session.parse_chat_output


def _parse_chat_output(self, text):
    """A generated reply split by the model's syntax (llm42_session_parse_chat_output): a dict of
    content, reasoning_content (None where none) and tool_calls (name, arguments dict, id)."""
    import json
    return json.loads(_Session_parse_chat_output(self, text))


Session.parse_chat_output = _parse_chat_output
_Request_status = Request.status
Request.status = lambda self: Status(_Request_status(self))
_Request_finish_reason = Request.finish_reason
Request.finish_reason = lambda self: FinishReason(_Request_finish_reason(self))
%}
