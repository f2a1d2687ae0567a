from samark.cli import app

app(prog_name="samark")
