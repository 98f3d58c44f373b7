#!/usr/bin/env python3
"""Writes data/sample-dump/: a small month of RFB zips in the real format (Latin-1, `;`, every
field quoted, no header) whose rows show every known gotcha of the real dumps that can occur in a file.
Lookup tables are the real ones (from ../shared when present, else the copies already in
data/sample-dump/). Deterministic: re-running yields byte-identical zips.

Then data/sample-dump-next/: the month after (2026-10, stamps D61013), the same rows with one
planted change of every event kind (a build of it with --previous records them).

Each planted quirk is listed in data/sample-dump/QUIRKS.md, each planted change in
data/sample-dump-next/QUIRKS.md; tests assert their outcome."""
import io, os, sys, zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "data", "sample-dump")
NEXT = os.path.join(ROOT, "data", "sample-dump-next")
REAL = os.path.join(ROOT, "..", "shared", "rfb", "samples", "real-extract-2026")


def dv(base12):
    v = [ord(c) - 48 for c in base12]
    def d(vals, w):
        r = sum(a * b for a, b in zip(vals, w)) % 11
        return 0 if r < 2 else 11 - r
    d1 = d(v, [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2])
    d2 = d(v + [d1], [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2])
    return f"{d1}{d2}"


def q(fields):
    return ";".join('"' + f.replace('"', '""') + '"' for f in fields)


def write_zip(out, stamp, name, members):
    path = os.path.join(out, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members:
            info = zipfile.ZipInfo(member, stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            if member.endswith("/"):
                info.external_attr = 0o40755 << 16
            z.writestr(info, data)


def lines(rows, eol="\n", tail=""):
    return (eol.join(rows) + eol + tail).encode("latin-1")


def estab(basico, ordem, *, dvs=None, matriz="1", fantasia="", sit="02", dsit="20200101", mot="00", cidext="",
          pais="", inicio="20200101", cnae="6204000", sec="", tipo="RUA", logr="DAS FLORES", num="10", compl="",
          bairro="CENTRO", cep="01310100", uf="SP", mun="7107", ddd1="11", tel1="12345678", ddd2="", tel2="",
          dddfax="", fax="", email="", sitesp="", dsitesp=""):
    d = dvs if dvs is not None else dv((basico + ordem).upper().rjust(12, "0"))
    return q([basico, ordem, d, matriz, fantasia, sit, dsit, mot, cidext, pais, inicio, cnae, sec, tipo, logr, num,
              compl, bairro, cep, uf, mun, ddd1, tel1, ddd2, tel2, dddfax, fax, email, sitesp, dsitesp])


def write_month(out, date, stamp, nxt):
    """One month into `out`: the sample month, or with `nxt` the month after it, where
    `pick(this, then)` takes the planted changes (listed in data/sample-dump-next/QUIRKS.md)."""
    os.makedirs(out, exist_ok=True)

    def pick(this, then):
        return then if nxt else this

    def zip_(name, members):
        write_zip(out, stamp, name, members)

    def present(rows):
        return [r for r in rows if r is not None]

    # Lookups: the real tables, renamed to this month's members.
    lookups = {"Cnaes": "CNAECSV", "Motivos": "MOTICSV", "Municipios": "MUNICCSV", "Naturezas": "NATJUCSV",
               "Paises": "PAISCSV", "Qualificacoes": "QUALSCSV"}
    for zname, suffix in lookups.items():
        src = os.path.join(REAL, zname + ".zip")
        if not os.path.exists(src):
            src = os.path.join(OUT, zname + ".zip")
        with zipfile.ZipFile(src) as z:
            data = z.read(z.namelist()[0])
        zip_(zname + ".zip", [(f"F.K03200$Z.{date}.{suffix}", data)])

    empresas0 = present([
        q(["11222333", "EMPRESA EXEMPLO LTDA", "2062", "49", pick("10000,00", "15000,00"), "01", ""]),
        q(["12345678", "12.345.678 FULANO DE TAL", "2135", "50", "5000,00", "01", ""]),
        q(["22333444", "FULANO DE TAL 12345678909", pick("2135", "2062"), "50", "1000,00", "01", ""]),
        q(["44555666", "MUNICIPIO DE EXEMPLO", "1244", "05", "0,00", "05", "SAO PAULO - SP"]),
        q(["44555666", "MUNICIPIO DE EXEMPLO", "1244", "05", "0,00", "05", "SAO PAULO - SP"]),
        pick(q(["55666777", "CAPITAL SENTINELA SA", "2054", "10", "999999999999,00", "05", ""]), None),
        q(["66777888", "SEM PORTE", "2062", "49", "120000000000,00", pick("", "01"), ""]),
        q(["ab12cd34", pick("ALFA  NUMERICA\x00 LTDA", "ALFA NUMERICA SERVICOS LTDA"), "2062", "49",
           "000000010000,00", "3", ""]),
        q(["77888999", "PIO XII COM\xc9RCIO IMPORTA\xc7\xc3O E EXPORTA\xc7\xc3O EIRELI", "2305", "65", "50000,5", "03", ""]),
        q(["88999000", "SHORT ROW", "2062"]),
        q(["1234567", "BASE SEM ZERO A ESQUERDA", "2062", "36", "1,00", "01", ""]),
        pick(None, q(["99887766", "NOVA EMPRESA DE TESTE LTDA", "2062", "49", "1000,00", "01", ""])),
    ])
    zip_("Empresas0.zip", [(f"K3241.K03200Y0.{date}.EMPRECSV", lines(empresas0))])
    empresas1 = [
        q(["11222333", "EMPRESA EXEMPLO LTDA (OUTRA VERSAO)", "2062", "49", "20000,00", "03", ""]),
        q(["99000111", "QUEBRA\nDE LINHA LTDA", "2062", "49", "1,00", "01", ""]),
        q(["AB12CD3!", "BASE INVALIDA", "2062", "49", "1,00", "01", ""]),
    ]
    zip_("Empresas1.zip", [(f"K3241.K03200Y1.{date}.EMPRECSV", lines(empresas1, tail="\n\n"))])

    estab2 = present([
        # Next month: another main CNAE; the secondary ones only reordered (no event).
        estab("11222333", "0001", fantasia="EXEMPLO", cnae=pick("6204000", "6201501"),
              sec=pick("6201501,6202300,6203100,6201501", "6202300,6201501,6203100"), num="S/N",
              compl="EDIF X;BLOCO 2;APTO 3", cep="1005010", ddd1="011", email="contato@exemplo.com.br"),
        estab("11222333", "0002", matriz="2", sit="08", dsit="0", mot="01", pais="105", inicio="00000000",
              cnae="4781400", tipo="S\xcdTIO", logr="PRA\xc7A  DA S\xc9", num="12", compl="SALA  01 ", bairro="S\xc9",
              cep="01001000", ddd1="0", tel1="0", email="CONTATO@EXEMPLO.COM.BR", sitesp="RECUPERACAO JUDICIAL",
              dsitesp="20191104"),
        estab("44555666", "0001", dsit="20200427", cidext="BUENOS AIRES", pais="063", inicio="20200427",
              cnae="8411600", tipo="", logr="PALPA", num="2862", bairro="COLEGIALES", cep="", uf="EX", mun="9707",
              ddd1="", tel1=""),
        estab("12345678", "0001", sit=pick("4", "8"), dsit=pick("20231106", "20261005"), mot=pick("32", "01"),
              pais="150", inicio="2021221", cnae="8888888", tipo="RUA", logr="X", num="1",
              compl="FUNDOS ANEXO A RESID?NCIA", bairro="B", cep="00000000", uf="MG", mun="1182", ddd1="37",
              tel1="99775636"),
        estab("ab12cd34", "0001", fantasia="ALFANUMERICA", inicio="20260801", tipo="RUA", logr="Y", num="1",
              bairro="C", cep="70000000", uf="DF", mun="9701", ddd1="61", tel1="33334444"),
        estab("22333444", "0001", fantasia="FULANO 12345678909 ME", sit="2", mot="0", cnae="111301",
              sec="", compl="FUNDOS\\", bairro="JARDIM\xa0\xa0AM\xc9RICA", email=" Fulano@Mail.COM ", ddd1="0021",
              tel1="98765432", cep=pick("01310100", "13010000"), mun=pick("7107", "6291")),
        estab("11222333", "0003", dvs="00", fantasia="DIGITO ERRADO"),
        estab("33444555", "0001", fantasia='BAR ""DO ZE""'.replace('""', '"'), cnae="5611201", tipo="AVENIDA",
              logr=pick("PAULISTA", "BRIGADEIRO  LUIS ANTONIO"), num="1000", compl="ANDAR 5", bairro="BELA VISTA",
              cep="01310100"),
        pick(estab("55666777", "0001", fantasia="SEM\x00NUL", sit="03", cnae="6204000", tel1="", ddd1="11"), None),
        q(["66777888", "0001", "00", "1", "CAMPOS A MENOS"]),
        pick(None, estab("99887766", "0001", fantasia="NOVA", inicio="20261001", cnae="4751201")),
        pick(None, estab("12345678", "0002", matriz="2", inicio="20261002", cnae="8888888", uf="MG", mun="1182",
                         cep="35500000")),
    ])
    zip_("Estabelecimentos2.zip", [(f"K3241.K03200Y0.{date}.ESTABELE", lines(estab2, tail="\n\n"))])
    estab10 = [
        estab2[0],
        estab("44555666", "0001", fantasia="VERSAO POSTERIOR", uf="EX", mun="9707"),
        estab("44555666", "0002", matriz="2", fantasia=pick("FILIAL UNICA SEM MATRIZ LISTADA", "FILIAL UNICA")),
        estab("77888999", "0003", matriz="2", fantasia="SO FILIAIS B"),
        estab("77888999", "0002", matriz="2", fantasia="SO FILIAIS A", sec=pick("", "4751201,4789099")),
    ]
    zip_("Estabelecimentos10.zip", [(f"K3241.K03200Y1.{date}.ESTABELE", lines(estab10, eol="\r\n"))])

    socios = present([
        q(["11222333", "2", "FULANO DE TAL", "***456789**", "49", "20200101", "", "***000000**", "", "00", "5"]),
        q(["11222333", "2", "CICLANO DE TAL", "***456789**", "22", "20200101", "", "***000000**", "", "00", "4"]),
        q(["11222333", "1", "HOLDING EXEMPLO SA", "44555666000181", "22", "20200101", "", "***123456**", "BELTRANO", "05", "0"]),
        q(["11222333", "3", "FOREIGN PARTNER LLC", "", "37", "20020320", "493", "***972348**", "REPRESENTANTE", "17", "0"]),
        pick(q(["11222333", "2", "ANTIGO  SOCIO", "***111222**", "36", "0", "", "***000000**", "", "00", "7"]),
             q(["11222333", "2", "NOVA SOCIA", "***987654**", "49", "20261001", "", "***000000**", "", "00", "3"])),
        q(["11222333", "2", "FULANO DE TAL", "***456789**", "49", "20200101", "", "***000000**", "", "00", "5"]),
        q(["44555666", "2", "PREFEITO", "***333444**", "10"]),
        q(["12345678", "2", "FULANO DE TAL", "***456789**", "50", "20210101", "", "***000000**", "", "00", "6"]),
        pick(None, q(["99887766", "2", "SOCIO NOVO", "***135790**", "49", "20261001", "", "***000000**", "", "00", "3"])),
    ])
    zip_("Socios0.zip", [(f"K3241.K03200Y0.{date}.SOCIOCSV", lines(socios))])
    simples = present([
        q(["11222333", "S", "20070701", "00000000", "N", "00000000", "00000000"]),
        pick(q(["12345678", "S", "20210101", "00000000", "S", "20210101", "00000000"]),
             q(["12345678", "N", "20210101", "20261001", "N", "20210101", "20261001"])),
        pick(q(["22333444", "", "00000000", "00000000", "", "00000000", "00000000"]),
             q(["22333444", "S", "20261001", "00000000", "S", "20261001", "00000000"])),
        q(["22333444", "S", "20220101", "00000000", "S", "20220101", "00000000"]),
        pick(None, q(["99887766", "S", "20261001", "00000000", "N", "00000000", "00000000"])),
    ])
    zip_("Simples.zip", [(f"F.K03200$W.SIMPLES.CSV.{date}", lines(simples))])

    header = "ano,cnpj,cnpj_da_scp,forma_de_tributacao,quantidade_de_escrituracoes"
    real = present(["2023,11.222.333/0001-81,0,LUCRO REAL,1", pick(None, "2025,44.555.666/0001-81,0,LUCRO REAL,1")])
    zip_("Lucro Real.zip", [("Lucro Real.csv", lines([header] + real, eol="\r\n"))])
    zip_("Lucro Presumido.zip", [
        ("Lucro Presumido/", b""),
        ("Lucro Presumido/Lucro Presumido 2022.csv", lines([header, "2022,11.222.333/0001-81,0,LUCRO PRESUMIDO,1"])),
        ("Lucro Presumido/Lucro Presumido 2024.csv", lines([header, "2024,44.555.666/0001-81,0,LUCRO PRESUMIDO,1",
                                                            "2024,11.222.333/0001-99,0,LUCRO PRESUMIDO,1"])),
    ])
    zip_("Imunes e Isentas.zip", [("Imunes e Isentas.csv", lines([header, "2023,44.555.666/0001-81,0,IMUNE DO IRPJ,1"]))])


def main():
    write_month(OUT, "D60913", (2026, 9, 13, 0, 0, 0), False)
    write_month(NEXT, "D61013", (2026, 10, 13, 0, 0, 0), True)


if __name__ == "__main__":
    sys.exit(main())
