"""The Python binding against stories260K: greedy output equal to llama.cpp's (which the C API
reproduces), streaming, deterministic requests, cancel, every error path, and no leak over 200
create/close cycles. Run by ctest with LLM42_TEST_MODEL and LLM42_TEST_EXPECTED (llama.cpp's
greedy ids for "Once upon a time", from ../shared/reference)."""
import os
import tempfile
import threading
import time
import unittest

import llm42

MODEL = os.environ.get("LLM42_TEST_MODEL", "")
EXPECTED = [int(t) for t in os.environ.get("LLM42_TEST_EXPECTED", "").split()]


def open_session(mode=llm42.Mode.SELECTIVE, path=MODEL):
    with llm42.SessionOptions() as so, llm42.Determinism(mode) as policy:
        so.set_model_path(path)
        so.set_threads(1)
        so.set_kv_cache_tokens(1024)
        so.set_determinism(policy)
        return llm42.Session(so)


def request_options(prompt="Once upon a time", max_tokens=32, **settings):
    ro = llm42.RequestOptions()
    ro.set_prompt(prompt)
    ro.set_max_tokens(max_tokens)
    for name, value in settings.items():
        getattr(ro, "set_" + name)(value)
    return ro


def model_mappings():
    with open("/proc/self/maps") as maps:
        return sum(1 for line in maps if os.path.basename(MODEL) in line)


@unittest.skipUnless(os.path.exists(MODEL), "stories260K.gguf is missing (../shared/models)")
class BindingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.session = open_session()

    @classmethod
    def tearDownClass(cls):
        cls.session.close()

    def test_greedy_matches_reference_and_streams(self):
        with request_options() as ro, self.session.submit(ro) as r:
            streamed = "".join(r)  # iterating yields text chunks until the request finishes
            self.assertTrue(r.is_finished())
            self.assertEqual(r.output_tokens(), EXPECTED[:32])
            self.assertIsInstance(r.output_tokens(), list)
            self.assertEqual(streamed, r.output_text())
            self.assertTrue(streamed.startswith(", there was a little girl named Lily"))
            self.assertEqual(r.status(), llm42.Status.OK)
            self.assertEqual(r.finish_reason(), llm42.FinishReason.LENGTH)

    def test_tokenize_round_trip(self):
        ids = self.session.tokenize("Once upon a time", True)
        self.assertEqual(ids, [1, 403, 407, 261, 378])  # llama.cpp's prompt ids
        self.assertEqual(self.session.detokenize(ids[1:]), "Once upon a time")
        self.assertEqual(self.session.detokenize(self.session.tokenize("Grüße 🦙", False)), "Grüße 🦙")

    def test_apply_chat_template_renders_json_messages(self):
        import json
        messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
        options = {"template": "{% for m in messages %}<{{ m.role }}>{{ m.content | upper }}{% endfor %}"
                               "{{ tools | length if tools else 'no tools' }}"}
        self.assertEqual(self.session.apply_chat_template(json.dumps(messages), json.dumps(options)),
                         "<user>HI<assistant>YOno tools")
        # Plain lists and dicts, as a Python caller holds them.
        options["tools"] = [{"type": "function", "function": {"name": "f"}}]
        self.assertEqual(self.session.apply_chat_template(messages, options), "<user>HI<assistant>YO1")
        with self.assertRaises(llm42.Llm42Exception) as e:  # stories260K has no template of its own
            self.session.apply_chat_template(messages)
        self.assertEqual(e.exception.status, llm42.Status.FAILED_PRECONDITION)

    def test_parse_chat_output_gives_a_dict(self):
        # stories260K has no chat template: plain text, <think> reasoning.
        self.assertEqual(self.session.parse_chat_output("<think>hm</think>Hi"),
                         {"content": "Hi", "reasoning_content": "hm", "tool_calls": []})

    def test_tool_calls_are_dicts_in_and_out(self):
        # A session template that writes Hermes calls gives stories260K a tool syntax; the request
        # must call the tool (one call), and the reply parses back into a dict of its arguments.
        tools = [{"type": "function", "function": {"name": "move_to", "parameters": {
            "type": "object", "properties": {"place": {"enum": ["tower", "forest"]}},
            "required": ["place"], "additionalProperties": False}}}]
        with llm42.SessionOptions() as so:
            so.set_model_path(MODEL)
            so.set_threads(1)
            so.set_kv_cache_tokens(1024)
            so.set_chat_template("{{ messages }}<tool_call>")
            with llm42.Session(so) as session:
                with request_options(max_tokens=96, deterministic=True, seed=3, temperature=0.7) as ro:
                    ro.set_tools(session, tools, "required", parallel_calls=False)
                    with session.submit(ro) as r:
                        r.wait_for(-1)
                        parsed = session.parse_chat_output(r.output_text())
        self.assertEqual(len(parsed["tool_calls"]), 1, parsed)
        self.assertEqual(parsed["tool_calls"][0]["name"], "move_to")
        self.assertIn(parsed["tool_calls"][0]["arguments"]["place"], ("tower", "forest"))

    def test_deterministic_requests_repeat_and_seed_matters(self):
        def run(seed):
            with request_options(max_tokens=24, temperature=0.9, seed=seed, deterministic=True) as ro:
                with self.session.submit(ro) as r:
                    r.wait_for(-1)
                    self.assertEqual(r.effective_seed(), seed)
                    return r.output_tokens()

        first = run(7)
        self.assertEqual(first, run(7))
        self.assertNotEqual(first, run(8))  # sensitivity control: the output depends on the seed

    def test_conversation_continues_a_finished_request(self):
        # The second turn continues the first (set_parent): its history comes from the prefix
        # cache, and it gives the tokens of a request whose prompt is the whole history.
        settings = dict(max_tokens=24, temperature=0.8, seed=5, deterministic=True)
        with request_options(**settings) as ro, self.session.submit(ro) as first:
            self.assertTrue(first.wait_for(-1))
            with request_options(" Then the sun came out.", **settings) as ro2:
                ro2.set_parent(first)
                with self.session.submit(ro2) as second:
                    self.assertTrue(second.wait_for(-1))
                    self.assertGreaterEqual(second.stat(llm42.Stat.CACHED_PROMPT_TOKENS), 16)
                    history = (self.session.tokenize("Once upon a time", True) + first.output_tokens()
                               + self.session.tokenize(" Then the sun came out.", False))
                    with request_options(**settings) as whole_ro:
                        whole_ro.set_prompt_tokens(history)
                        with self.session.submit(whole_ro) as whole:
                            self.assertTrue(whole.wait_for(-1))
                            self.assertEqual(whole.output_tokens(), second.output_tokens())

    def test_saved_conversation_continues_in_another_session(self):
        # save_conversation / load_parent: a new session (a restarted app) continues the saved
        # conversation with the bits of the same continuation in the session that saved it.
        path = os.path.join(tempfile.gettempdir(), "llm42_test_%d.llm42" % os.getpid())
        settings = dict(max_tokens=24, temperature=0.8, seed=5, deterministic=True)
        with request_options(**settings) as ro, self.session.submit(ro) as first:
            self.assertTrue(first.wait_for(-1))
            self.session.save_conversation(first, path)
            with request_options(" The end.", **settings) as nxt:
                nxt.set_parent(first)
                with self.session.submit(nxt) as here:
                    self.assertTrue(here.wait_for(-1))
                    expected = here.output_tokens()
        other = open_session()
        try:
            with request_options(" The end.", **settings) as nxt:
                nxt.load_parent(other, path)
                with other.submit(nxt) as there:
                    self.assertTrue(there.wait_for(-1))
                    self.assertEqual(there.output_tokens(), expected)
                    self.assertGreaterEqual(there.stat(llm42.Stat.CACHED_PROMPT_TOKENS), 16)
            with request_options() as ro, self.assertRaises(llm42.Llm42Exception) as e:
                ro.load_parent(other, path + ".missing")
            self.assertEqual(e.exception.status, llm42.Status.NOT_FOUND)
        finally:
            other.close()
            os.remove(path)

    def test_type_stubs_match_the_module(self):
        # llm42.pyi (installed beside the module) lists every public class, method and function
        # of the module, and nothing it lacks.
        import ast
        import inspect
        stub_path = os.path.join(os.path.dirname(llm42.__file__), "llm42.pyi")
        with open(stub_path) as f:
            tree = ast.parse(f.read())
        stub = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                stub[node.name] = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                                   and not n.name.startswith("_")}
                stub[node.name] |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stub[node.name] = None
        module = {}
        for name, obj in vars(llm42).items():
            if name.startswith(("_", "LLM42_", "FinishReason_", "SwigPy")) or inspect.ismodule(obj):
                continue
            if inspect.isclass(obj):
                if issubclass(obj, int):
                    module[name] = {m.name for m in obj}
                else:
                    module[name] = {m for m in vars(obj) if not m.startswith("_") and callable(getattr(obj, m))}
            elif callable(obj):
                module[name] = None
        self.assertEqual(sorted(stub), sorted(module))
        for name in module:
            self.assertEqual(stub[name], module[name], name)

    def test_async_for_streams_the_output(self):
        import asyncio

        async def collect(r):
            return "".join([chunk async for chunk in r])

        with request_options(max_tokens=16) as ro, self.session.submit(ro) as r:
            self.assertEqual(asyncio.run(collect(r)), r.output_text())

    def test_exceptions_are_also_builtin_ones(self):
        with self.assertRaises(FileNotFoundError) as e:
            open_session(llm42.Mode.SELECTIVE, MODEL + ".missing")
        self.assertIsInstance(e.exception, llm42.Llm42Exception)
        self.assertEqual(e.exception.status, llm42.Status.NOT_FOUND)
        with request_options() as ro, self.assertRaises(ValueError):
            ro.set_top_logprobs(21)  # OUT_OF_RANGE
        with request_options() as ro, self.assertRaises(ValueError):
            ro.add_stop("")  # INVALID_ARGUMENT

    def test_version_rule(self):
        self.assertEqual(llm42.version_problem(), "")  # this build and its library
        self.assertEqual(llm42.version_problem_between(1002003, 1004000), "")  # a newer 1.x library
        self.assertIn("built for libllm42 1.2.3", llm42.version_problem_between(1002003, 1001000))  # older
        self.assertNotEqual(llm42.version_problem_between(1002003, 2000000), "")  # another major
        self.assertNotEqual(llm42.version_problem_between(1000, 2000), "")  # 0.1 against 0.2: no promise
        self.assertEqual(llm42.version_problem_between(1000, 1005), "")  # a 0.1 patch release

    def test_log_goes_to_the_host(self):
        # Captured: a session's "loaded ..." info line arrives through log_messages(), with its
        # level; nothing is left after draining; released, the queue stays empty.
        llm42.set_log_level(llm42.LLM42_LOG_INFO)
        llm42.capture_log(True)
        try:
            list(llm42.log_messages())
            open_session().close()
            messages = list(llm42.log_messages())
            self.assertTrue(any(level == llm42.LLM42_LOG_INFO and "loaded" in text for level, text in messages),
                            messages)
            self.assertEqual(llm42.log_message_level(), -1)
            self.assertEqual(llm42.take_log_message(), "")
        finally:
            llm42.capture_log(False)
            llm42.set_log_level(llm42.LLM42_LOG_WARNING)
        open_session().close()
        self.assertEqual(list(llm42.log_messages()), [])

    def test_library_functions_and_read_tokens(self):
        self.assertEqual(llm42.version_string().count("."), 2)
        self.assertGreater(llm42.version_number(), 0)
        self.assertEqual(llm42.status_name(llm42.Status.NOT_FOUND), "LLM42_NOT_FOUND")
        llm42.set_log_level(3)  # errors only
        llm42.set_log_level(2)
        # read_tokens: [] is a quiet poll, None the end; every token arrives once.
        with llm42.Determinism(llm42.Mode.SELECTIVE) as policy:
            policy.set_decode_path(llm42.DecodePath.FIXED)
        with request_options(max_tokens=12) as ro, self.session.submit(ro) as r:
            ids = []
            while True:
                chunk = r.read_tokens(0)
                if chunk is None:
                    break
                ids += chunk
            self.assertEqual(ids, r.output_tokens())
            self.assertIsNone(r.read_tokens(-1))

    def test_logprobs_and_top_logprobs(self):
        # Three most likely tokens per position, most likely first; the chosen token's entry is
        # its logprob exactly.
        with request_options(max_tokens=8, temperature=0.8, seed=3, deterministic=True, logprobs=True,
                             top_logprobs=3, prompt_logprobs=True) as ro, self.session.submit(ro) as r:
            self.assertTrue(r.wait_for(-1))
            tokens, logprobs = r.output_tokens(), r.logprobs()
            self.assertEqual(len(r.prompt_logprobs()), len(self.session.tokenize("Once upon a time", True)) - 1)
            ids, values = r.top_logprob_tokens(), r.top_logprob_values()
        self.assertEqual(len(logprobs), len(tokens))
        self.assertEqual(len(ids), 3 * len(tokens))
        self.assertEqual(len(values), 3 * len(tokens))
        for i, token in enumerate(tokens):
            group = values[3 * i:3 * i + 3]
            self.assertEqual(group, sorted(group, reverse=True))
            self.assertTrue(all(v <= 0 for v in group))
            if token in ids[3 * i:3 * i + 3]:
                self.assertEqual(values[3 * i + ids[3 * i:3 * i + 3].index(token)], logprobs[i])
        with request_options() as ro, self.assertRaises(llm42.Llm42Exception) as e:
            ro.set_top_logprobs(21)
        self.assertEqual(e.exception.status, llm42.Status.OUT_OF_RANGE)

    def test_receipts_replay_and_refuse_damage(self):
        # A deterministic request's receipt (bytes) is reproduced by another session; a damaged
        # one raises FORMAT_ERROR; another KV type is another schedule, with a reason.
        fingerprint = self.session.fingerprint()
        self.assertEqual(len(fingerprint), 64)
        with request_options(max_tokens=16, temperature=0.8, seed=3, deterministic=True) as ro, \
                self.session.submit(ro) as r:
            self.assertTrue(r.wait_for(-1))
            receipt = r.receipt()
        self.assertIsInstance(receipt, bytes)
        other = open_session()
        try:
            check = other.verify_receipt(receipt)
            self.assertTrue(check.reproduced())
            self.assertEqual(check.outcome(), llm42.ReceiptOutcome.REPRODUCED)
            self.assertEqual(check.first_difference(), -1)
            damaged = bytearray(receipt)
            damaged[len(damaged) // 2] ^= 4
            with self.assertRaises(llm42.Llm42Exception) as e:
                other.verify_receipt(bytes(damaged))
            self.assertEqual(e.exception.status, llm42.Status.FORMAT_ERROR)
        finally:
            other.close()
        with llm42.SessionOptions() as so:
            so.set_model_path(MODEL)
            so.set_threads(1)
            so.set_kv_dtype("f16")
            so.set_kv_prefault(True)  # resident KV changes no output: the KV type alone differs
            f16 = llm42.Session(so)
        try:
            check = f16.verify_receipt(receipt)
            self.assertEqual(check.outcome(), llm42.ReceiptOutcome.OTHER_SCHEDULE)
            self.assertIn("KV type", check.detail())
        finally:
            f16.close()

    def test_unknown_status_codes_do_not_break_the_exception(self):
        # A newer libllm42 may add statuses: the exception keeps the code instead of failing.
        e = llm42.Llm42Exception(999, "from the future")
        self.assertEqual(e.status, 999)
        self.assertIn("999", str(e))
        self.assertEqual(llm42.Llm42Exception(5, "x").status, llm42.Status.UNSUPPORTED)

    def test_cancel(self):
        with request_options(max_tokens=1000, ignore_eos=True) as ro, self.session.submit(ro) as r:
            canceller = threading.Thread(target=r.cancel)
            canceller.start()
            self.assertTrue(r.wait_for(-1))
            canceller.join()
            self.assertEqual(r.status(), llm42.Status.CANCELLED)
            self.assertEqual(r.finish_reason(), llm42.FinishReason.CANCELLED)
            self.assertLess(len(r.output_tokens()), 1000)

    def test_close_while_another_thread_reads(self):
        # close() lands while a reader thread is inside read_text(-1) (the GIL released): the
        # request is cancelled, its handle freed once the reader's call returns, and the reader's
        # loop ends with the stream's end or FAILED_PRECONDITION (bindings/swig/handle_box.h).
        # Bindings that destroyed the handle at once segfaulted here.
        for attempt in range(12):
            with request_options(max_tokens=900, ignore_eos=True) as ro:
                r = self.session.submit(ro)
            ended = []

            def read():
                try:
                    for _ in r:
                        pass
                    ended.append("end")
                except llm42.Llm42Exception as e:  # CancelledError (closing cancels), or closed
                    ended.append(e.status)

            reader = threading.Thread(target=read)
            reader.start()
            time.sleep(0.001 * (attempt % 4))
            r.close()
            reader.join(timeout=60)
            self.assertFalse(reader.is_alive())
            self.assertIn(ended[0], ("end", llm42.Status.CANCELLED, llm42.Status.FAILED_PRECONDITION))
            self.assertStatus(llm42.Status.FAILED_PRECONDITION, r.is_finished)

    def test_waiting_releases_the_gil(self):
        with request_options(max_tokens=900, ignore_eos=True) as ro, self.session.submit(ro) as r:
            waiter = threading.Thread(target=r.wait_for, args=(-1,))
            waiter.start()
            time.sleep(0.02)  # the waiter is inside wait_for now
            sum(range(100000))  # runs at once only if wait_for let go of the GIL
            still_running = not r.is_finished()
            waiter.join()
            self.assertTrue(still_running)

    def test_a_failed_stream_raises_at_its_end(self):
        # Requests made to fail after 3 tokens (llm42_testing_fail_requests_after, the C testing
        # hook, through ctypes): iteration, async iteration and completion() raise Llm42Exception
        # with INTERNAL and the failure's message. Checked to fail with the SWIG layer's
        # CheckEnded emptied (the streams then end quietly).
        import asyncio
        import ctypes
        lib = ctypes.CDLL("libllm42.so.0")  # the library the module loaded
        lib.llm42_testing_fail_requests_after.argtypes = [ctypes.c_int32]
        self.assertEqual(lib.llm42_testing_fail_requests_after(3), 0)

        async def stream(r):
            return [chunk async for chunk in r]

        async def completion(r):
            return await r.completion()
        try:
            with request_options(max_tokens=32, ignore_eos=True) as ro:
                with self.session.submit(ro) as r:
                    with self.assertRaises(llm42.Llm42Exception) as e:
                        for _ in r:
                            pass
                    self.assertEqual(e.exception.status, llm42.Status.INTERNAL)
                    self.assertIn("injected failure", str(e.exception))
                    self.assertEqual(r.finish_reason(), llm42.FinishReason.ERROR)
                for form in (stream, completion):
                    with self.session.submit(ro) as r:
                        with self.assertRaises(llm42.Llm42Exception) as e:
                            asyncio.run(form(r))
                        self.assertEqual(e.exception.status, llm42.Status.INTERNAL)
        finally:
            lib.llm42_testing_fail_requests_after(0)

    def test_a_cancelled_stream_raises_at_its_end(self):
        # Iterating, reading tokens and async iteration all end a cancelled request with
        # llm42.CancelledError, not quietly; status() is PENDING while it runs. Checked to fail
        # with the SWIG layer's CheckEnded removed (the iteration then ends normally).
        import asyncio
        with request_options(max_tokens=1900, ignore_eos=True) as ro, self.session.submit(ro) as r:
            self.assertEqual(r.status(), llm42.Status.PENDING)
            r.check_status()  # nothing to raise while running
            self.assertIsNotNone(r.read_text(-1))
            r.cancel()
            with self.assertRaises(llm42.CancelledError) as e:
                for _ in r:
                    pass
            self.assertEqual(e.exception.status, llm42.Status.CANCELLED)
            with self.assertRaises(llm42.CancelledError):  # after the tokens read_tokens has not given yet
                while True:
                    r.read_tokens(0)
            self.assertRaises(llm42.CancelledError, r.check_status)
            self.assertEqual(r.status(), llm42.Status.CANCELLED)

            async def collect():
                return [chunk async for chunk in r]
            self.assertRaises(llm42.CancelledError, asyncio.run, collect())

    def test_cancelling_the_async_iteration_cancels_the_request(self):
        import asyncio

        async def consume_then_cancel(r):
            async def consume():
                async for _ in r:
                    pass
            task = asyncio.ensure_future(consume())
            await asyncio.sleep(0.05)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task

        with request_options(max_tokens=1900, ignore_eos=True) as ro, self.session.submit(ro) as r:
            asyncio.run(consume_then_cancel(r))
            self.assertTrue(r.wait_for(10000))
            self.assertEqual(r.status(), llm42.Status.CANCELLED)

    def test_one_dispatcher_thread_serves_64_async_streams(self):
        # 64 concurrent `async for` loops and completion() awaits on one session: every stream
        # gets llama.cpp's greedy tokens, and the only thread they add is the session's
        # dispatcher (which ends with the last stream). Checked to fail with __aiter__ and
        # completion() waiting on the loop's executor (a blocked executor thread per stream, up to
        # the executor's size: 6 more threads on two cores, and no dispatcher).
        import asyncio
        before = threading.active_count()
        peak = [0]
        dispatchers = set()

        async def main():
            done = asyncio.Event()

            async def sample():
                while not done.is_set():
                    peak[0] = max(peak[0], threading.active_count())
                    dispatchers.update(t.ident for t in threading.enumerate() if t.name == "llm42-dispatcher")
                    await asyncio.sleep(0.002)

            async def stream(r):
                return "".join([chunk async for chunk in r])

            requests = [self.session.submit(ro) for _ in range(64)]
            sampler = asyncio.ensure_future(sample())
            texts = await asyncio.gather(*[stream(r) for r in requests[:48]],
                                         *[r.completion() for r in requests[48:]])
            done.set()
            await sampler
            return requests, texts

        with request_options(max_tokens=8, ignore_eos=True) as ro:
            requests, texts = asyncio.run(main())
        try:
            for r, text in zip(requests, texts):
                self.assertEqual(r.output_tokens(), EXPECTED[:8])
                self.assertEqual(text if isinstance(text, str) else text.output_text(), r.output_text())
            self.assertEqual(len(dispatchers), 1)  # one thread served them all
            self.assertLessEqual(peak[0] - before, 1)
        finally:
            for r in requests:
                r.close()

    def test_a_session_loads_without_blocking(self):
        # open_session_async polls a SessionLoader: the progress it reports never goes back and
        # ends at 1.0, and the session it returns gives llama.cpp's greedy tokens; a task
        # cancelled while it waits raises the cancellation (the load is cancelled or discarded).
        import asyncio
        seen = []
        with llm42.SessionOptions() as so:
            so.set_model_path(MODEL)
            so.set_threads(1)
            session = asyncio.run(llm42.open_session_async(so, seen.append))
            with session, request_options(max_tokens=8, ignore_eos=True) as ro, session.submit(ro) as r:
                r.wait_for(-1)
                self.assertEqual(r.output_tokens(), EXPECTED[:8])
            self.assertEqual(seen, sorted(seen))
            self.assertEqual(seen[-1], 1.0)

            async def cancelled():
                task = asyncio.ensure_future(llm42.open_session_async(so))
                await asyncio.sleep(0)
                task.cancel()
                await task
            self.assertRaises(asyncio.CancelledError, asyncio.run, cancelled())
            with llm42.SessionLoader(so) as loader:
                loader.cancel()
                self.assertTrue(loader.wait_for(-1))
                self.assertEqual(loader.progress(), 1.0)
                try:
                    loader.take().close()  # the load may have ended before the cancel
                except llm42.CancelledError:
                    pass

    def test_seeds_take_all_64_bits(self):
        high = 2**64 - 5  # above 2**63: negative in a signed binding
        with request_options(max_tokens=4, temperature=0.9, seed=high) as ro, self.session.submit(ro) as r:
            self.assertEqual(r.effective_seed(), high)
        with request_options() as ro:
            self.assertRaises(OverflowError, ro.set_seed, -1)
            self.assertRaises(OverflowError, ro.set_seed, 2**64)

    def test_generate_is_the_streamed_text(self):
        with request_options(max_tokens=24) as ro, self.session.submit(ro) as r:
            streamed = "".join(r)
        self.assertEqual(self.session.generate("Once upon a time", max_tokens=24), streamed)
        with request_options(max_tokens=24) as ro:
            self.assertEqual(self.session.generate(options=ro), streamed)
        self.assertEqual(self.session.generate([1, 403, 407, 261, 378], max_tokens=24, stop=["zzz"]), streamed)
        self.assertRaises(TypeError, self.session.generate, "x", no_such_option=1)
        self.assertRaises(ValueError, self.session.generate, "x", max_tokens=0)
        with open_session(llm42.Mode.OFF) as off:
            self.assertStatus(llm42.Status.UNSUPPORTED, lambda: off.generate("x", deterministic=True))

    def test_read_text_times_out_with_empty_string_and_ends_with_none(self):
        # A zero-timeout frame loop: "" is a quiet frame, None the end; nothing is lost even when
        # the request finishes between two polls.
        with request_options(max_tokens=16) as ro, self.session.submit(ro) as r:
            streamed = ""
            while True:
                chunk = r.read_text(0)  # never blocks
                if chunk is None:
                    break
                streamed += chunk
            self.assertEqual(streamed, r.output_text())
            self.assertIsNone(r.read_text(0))
            self.assertIsNone(r.read_text(-1))

    def assertStatus(self, status, fn, *args):
        with self.assertRaises(llm42.Llm42Exception) as ctx:
            fn(*args)
        self.assertEqual(ctx.exception.status, status)
        self.assertTrue(str(ctx.exception))

    def test_json_schema_bias_and_penalties(self):
        # A dict schema: the output is JSON valid under it, the request ends STOP when it is
        # complete, and a deterministic run repeats bitwise. Refused schemas and values raise.
        schema = {"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]},
                                                   "count": {"type": "integer", "minimum": 1, "maximum": 9}},
                  "required": ["mood", "count"]}

        def run():
            with request_options(max_tokens=120, temperature=0.8, seed=5, deterministic=True) as ro:
                ro.set_json_schema(schema)
                ro.set_logit_bias(100, -float("inf"))
                ro.set_repetition_penalty(1.2, 32)
                ro.set_frequency_penalty(0.1)
                ro.set_presence_penalty(0.1)
                with self.session.submit(ro) as r:
                    text = "".join(r)
                    self.assertEqual(r.finish_reason(), llm42.FinishReason.STOP)
                    self.assertNotIn(100, r.output_tokens())
                    return text, r.output_tokens()

        import json
        text, tokens = run()
        value = json.loads(text)
        self.assertIn(value["mood"], ("happy", "sad"))
        self.assertTrue(1 <= value["count"] <= 9)
        self.assertEqual(run(), (text, tokens))
        with llm42.RequestOptions() as ro:
            self.assertStatus(llm42.Status.INVALID_ARGUMENT, ro.set_json_schema, {"type": "string", "format": "email"})
            self.assertStatus(llm42.Status.INVALID_ARGUMENT, ro.set_grammar, "root ::= (")
            self.assertStatus(llm42.Status.OUT_OF_RANGE, ro.set_logit_bias, 3, float("nan"))
            self.assertStatus(llm42.Status.OUT_OF_RANGE, ro.set_repetition_penalty, 1.1, -1)
            ro.set_grammar('root ::= "yes" | "no"')
            self.assertStatus(llm42.Status.INVALID_ARGUMENT, ro.set_json_schema, "{}")

    def test_error_paths(self):
        self.assertStatus(llm42.Status.NOT_FOUND, open_session, llm42.Mode.SELECTIVE, MODEL + ".missing")
        with llm42.SessionOptions() as so:
            self.assertStatus(llm42.Status.OUT_OF_RANGE, so.set_threads, -1)
        with llm42.Determinism(llm42.Mode.SELECTIVE) as d:
            self.assertStatus(llm42.Status.OUT_OF_RANGE, d.set_window, 0)
        with llm42.RequestOptions() as ro:
            self.assertStatus(llm42.Status.OUT_OF_RANGE, ro.set_max_tokens, 0)
            ro.set_prompt_tokens([1, 999999])
            self.assertStatus(llm42.Status.INVALID_ARGUMENT, self.session.submit, ro)
        with llm42.RequestOptions() as ro:
            ro.add_message("user", "Hi")  # stories260K has no chat format
            self.assertStatus(llm42.Status.UNSUPPORTED, self.session.submit, ro)
        with open_session(llm42.Mode.OFF) as off, request_options(deterministic=True) as ro:
            self.assertStatus(llm42.Status.UNSUPPORTED, off.submit, ro)
        closed = open_session()
        closed.close()
        self.assertStatus(llm42.Status.FAILED_PRECONDITION, closed.tokenize, "x", False)
        closed.close()  # closing twice is harmless

    def test_no_leak_over_200_create_close_cycles(self):
        baseline = model_mappings()
        threads = len(os.listdir("/proc/self/task"))
        for _ in range(200):
            with open_session() as s, request_options(max_tokens=2) as ro, s.submit(ro) as r:
                r.wait_for(-1)
        self.assertEqual(model_mappings(), baseline)
        self.assertLessEqual(len(os.listdir("/proc/self/task")), threads)


if __name__ == "__main__":
    unittest.main()
