"""What the tests share: fakes, plain transcriptions used as truths, fixture files and
generators. Test files import from here (``from helpers.fake_llm import FakeChat``), never from
each other."""
