"""a2sgd-train's LSTM language model in PyTorch, shared by the benchmarks that time it:
Embedding(vocab, hidden) -> nn.LSTM(hidden, hidden, layers) -> Linear(hidden, vocab), untied, the
logits flattened to (steps x batch, vocab). torch's nn.LSTM keeps two bias vectors per layer where
a2sgd keeps one (4,653,200 parameters against 4,651,600 at the defaults)."""


def language_model(vocab, hidden, layers):
    import torch.nn as nn

    class LanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab, hidden)
            self.rnn = nn.LSTM(hidden, hidden, layers)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, x, state):
            out, state = self.rnn(self.encoder(x), state)
            return self.decoder(out).view(-1, vocab), state

    return LanguageModel()
